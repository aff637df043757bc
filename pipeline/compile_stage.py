"""The compile stage: the kernel specialisations a spec needs, built for each GPU arch without a GPU.

The spec is the only input: its dims become a KernelDims, each kernel package lists its instances for those dims,
and dayone.kernels.aot compiles them into a content-addressed cache with a resource table. With a GPU, the packages'
autotuning candidates (dayone.kernels.autotune) replace the shipped configs by the fastest correct ones on its arch.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from dayone.kernels.specialization import KernelDims, Specialization
from dayone.spec.schema import ModelSpec

if TYPE_CHECKING:  # the autotuner imports torch; compiling alone does not need it
    from dayone.kernels.autotune import Candidate, Tuned

# A cubin cache shared by every compile (`integrate compile` and run's compile stage), as TRITON_CACHE_DIR is for
# Triton: a cubin's key is everything that decides it (dayone.kernels.aot.cache_key), so any compile may read another's.
KERNEL_CACHE_ENV = "DAYONE_KERNEL_CACHE"
# Every kernel package whose aot module exposes specializations(dims); compile order follows the model's data flow.
KERNEL_PACKAGES = ("short_conv", "kda", "gated_rmsnorm", "mla_decode", "attn_residual", "situ", "mxfp4", "moe_combine")


def kernel_cache(default: Path) -> Path:
    """Where a compile keeps its cubins: $DAYONE_KERNEL_CACHE when set, else `default` (the command's own folder)."""
    shared = os.environ.get(KERNEL_CACHE_ENV)
    return Path(shared) if shared else default


def kernel_dims(spec: ModelSpec) -> KernelDims:
    kda, mla, moe = spec.kda, spec.mla, spec.moe
    bank_rows = 0
    if spec.residual.kind == "attention":
        bank_rows = sum(layer.snapshot for layer in spec.layers) + 1
    return KernelDims(
        hidden_size=spec.hidden_size,
        kda_num_heads=kda.num_heads if kda else 0,
        kda_head_dim=kda.head_dim if kda else 0,
        kda_gate=kda.gate.kind if kda else "",
        conv_kernel_size=kda.conv_kernel_size if kda else 0,
        mla_num_heads=mla.num_heads if mla else 0,
        kv_lora_rank=mla.kv_lora_rank if mla else 0,
        qk_nope_head_dim=mla.qk_nope_head_dim if mla else 0,
        qk_rope_head_dim=mla.qk_rope_head_dim if mla else 0,
        v_head_dim=mla.v_head_dim if mla else 0,
        moe_hidden_size=spec.moe_width if moe else 0,
        moe_intermediate_size=moe.expert_intermediate_size if moe else 0,
        num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
        latent_moe=bool(moe and moe.latent_size),
        mxfp4_group_size=spec.quantization.group_size if spec.quantization else 0,
        attn_res_max_rows=bank_rows,
        activation=spec.activation.kind,
    )


def plan_key(spec: ModelSpec, archs: Sequence[str]) -> str:
    """What decides every cubin of a compile, computed without importing triton or torch: the spec's kernel dims,
    the archs, the source of every kernel module (and of this file), and the installed Triton's version.

    A fully cached `integrate compile` looks this key up (dayone.kernels.aot.load_plan) instead of importing the
    kernel packages, which costs seconds; any edit to a kernel file or a Triton upgrade makes a new key.
    """
    import dayone.kernels

    digest = hashlib.sha256()
    root = Path(dayone.kernels.__file__).parent
    sources = {f"kernels/{p.relative_to(root).as_posix()}": p for p in root.rglob("*.py")}
    sources["compile_stage.py"] = Path(__file__)
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + hashlib.sha256(sources[name].read_bytes()).digest())
    try:
        triton = version("triton")
    except PackageNotFoundError:
        triton = None
    material = {
        "dims": asdict(kernel_dims(spec)),
        "archs": list(archs),
        "sources": digest.hexdigest(),
        "triton": triton,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def specializations_for(spec: ModelSpec) -> list[Specialization]:
    """Every kernel instance the spec's model needs. Call with TRITON_INTERPRET unset (see dayone.kernels.aot)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise RuntimeError("TRITON_INTERPRET=1 replaces kernels with interpreted ones; compile needs it unset")
    dims = kernel_dims(spec)
    specs: list[Specialization] = []
    for name in KERNEL_PACKAGES:
        specs.extend(importlib.import_module(f"dayone.kernels.{name}.aot").specializations(dims))
    return specs


def candidates_for(spec: ModelSpec) -> list[Candidate]:
    """The autotuning candidates of the kernel instances the spec needs, from every package that offers them."""
    dims = kernel_dims(spec)
    found: list[Candidate] = []
    for name in KERNEL_PACKAGES:
        candidates = getattr(importlib.import_module(f"dayone.kernels.{name}.aot"), "candidates", None)
        if candidates is not None:
            found.extend(candidates(dims))
    return found


def build_plan(
    specs: list[Specialization], archs: tuple[str, ...], tuned: Sequence[Tuned] = ()
) -> list[list[tuple[Specialization, str]]]:
    """What to compile, one list of (instance, arch) per shipped instance: the autotuning winner on the arch it was
    tuned for, the shipped config everywhere else."""
    winners = {(t.kernel, t.arch): t.winner_spec for t in tuned}
    return [[(winners.get((spec.kernel, arch), spec), arch) for arch in archs] for spec in specs]
