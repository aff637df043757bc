"""Rotary MLA in the generated SGLang and vLLM models: the rotary embedding each generated model builds (its
`self.rotary_emb = ...` expression, taken from the generated source) is constructed by the pinned framework itself
in its peer environment, called as the generated forward calls it (q_rope [T, heads, R], k_rope [T, 1, R]), and
turns them as the reference tier does (adapters/model/rope.py, checked against transformers' DeepSeek-V3 in
test_mla_rope.py); the softmax scale the generated code passes is the spec's.

The frameworks' rotary modules run their forward_native here (the CPU; a GPU run takes their fused kernels: not run).
Building the whole model on a CPU: vLLM does it in tests/conform/test_spec_variants.py, SGLang in
tests/conform/test_sglang_variants.py (the YaRN variant is among the honoured ones of both; SGLang's conform probe
imports its rotary embedding with the CPU engine switched on). SGLang's CPU rotary takes only a scaled rope, so an
unscaled one is "built: not run" there (it builds on a GPU only). The generated expression picks SGLang's GPU or
CPU rotary by the build device: both branches are built here where SGLang can."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from dayone.adapters.model.rope import Rotary
from dayone.adapters.targets import sglang, vllm
from dayone.core.numerics import assert_close
from model_fixtures import tiny_k3_spec, with_updates

ROOT = Path(__file__).resolve().parents[2]
YARN = {"kind": "yarn", "factor": 32.0, "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0,
        "mscale": 1.0, "mscale_all_dim": 0.7}  # fmt: skip
ROPES = {"yarn": {"theta": 50000.0, "scaling": YARN}, "plain-halves": {"theta": 10000.0, "interleave": False}}
TARGETS = {"vllm": vllm, "sglang": sglang}
POSITIONS = [0, 1, 2, 7, 15, 16, 17, 100, 511]  # YaRN caches 16 x 32 = 512 positions

# Runs in the framework's peer environment: for each job, builds the generated expression and rotates its inputs.
PROBE = textwrap.dedent(
    """
    import json, sys, types, torch
    target, jobs = sys.argv[1], json.loads(sys.argv[2])
    if target == "vllm":
        from vllm.config import VllmConfig, set_current_vllm_config
        from vllm.model_executor.layers.rotary_embedding import get_rope
        names, context = {"get_rope": get_rope}, lambda: set_current_vllm_config(VllmConfig())
    else:
        from sglang.srt.layers.rotary_embedding import get_rope_wrapper
        names, context = {"get_rope_wrapper": get_rope_wrapper}, lambda: torch.device("cpu")
    # the expression picks SGLang's rotary by the device the model is built on: both branches where both build
    devices = {"cpu": torch, "gpu": types.SimpleNamespace(get_default_device=lambda: types.SimpleNamespace(type="cuda"))}
    for job in jobs:
        data, out = torch.load(job["path"]), {}
        for device in job["devices"]:
            with context():
                dims = types.SimpleNamespace(mla_rope=job["R"])
                rotary = eval(job["rotary"], {**names, "torch": devices[device], "DIMS": dims})
            q, k = rotary.forward_native(data["positions"], data["q"].clone(), data["k"].unsqueeze(1).clone())
            out[device] = {"q": q, "k": k.squeeze(1), "kind": type(rotary).__name__}
        torch.save(out, job["path"])
    """
)


def rope_spec(name: str):
    return with_updates(tiny_k3_spec(5), {"max_position_embeddings": 512, "mla": {"nope": False, "rope": ROPES[name]}})


def latent_attention_init(source: str) -> dict[str, str]:
    """The generated LatentAttention.__init__'s rotary expression and softmax scale expression."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LatentAttention")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    found = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "self.rotary_emb":
            found["rotary"] = ast.unparse(node.value)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("RadixAttention", "MLAAttention"):
            scale = next((kw.value for kw in node.keywords if kw.arg == "scale"), None)
            found["scale"] = ast.unparse(scale if scale is not None else node.args[2])
    return found


def generated(target: str, spec) -> str:
    return next(t for p, t in TARGETS[target].files(spec).items() if p.endswith("/model.py"))


@pytest.fixture(scope="module", params=list(TARGETS))
def rotated(request, tmp_path_factory):
    """target, {rope: (spec, generated init expressions, inputs, the framework's rotated q and k)}: one peer run."""
    target = request.param
    peer = ROOT / ".venv" / "peers" / target / "bin" / "python"
    assert peer.is_file(), f"the {target} peer is not installed (.ci/setup.d)"
    tmp = tmp_path_factory.mktemp(target)
    cases, jobs = {}, []
    for name in ROPES:
        spec = rope_spec(name)
        found = latent_attention_init(generated(target, spec))
        R, gen = spec.mla.qk_rope_head_dim, torch.Generator().manual_seed(len(name))
        inputs = {"positions": torch.tensor(POSITIONS), "q": torch.randn(len(POSITIONS), spec.mla.num_heads, R,
                  generator=gen), "k": torch.randn(len(POSITIONS), R, generator=gen)}  # fmt: skip
        torch.save(inputs, tmp / f"{name}.pt")
        # vLLM builds one way; SGLang's CPU rotary takes only scaled ropes (get_rope_cpu asserts rope_scaling)
        devices = ["cpu"] if target == "vllm" else ["gpu", "cpu"] if spec.mla.rope.scaling else ["gpu"]
        jobs.append({"path": str(tmp / f"{name}.pt"), "rotary": found["rotary"], "R": R, "devices": devices})
        cases[name] = (spec, found, inputs)
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", SGLANG_USE_CPU_ENGINE="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([str(peer), "-c", PROBE, target, json.dumps(jobs)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return target, {name: (*cases[name], torch.load(tmp / f"{name}.pt")) for name in ROPES}


@pytest.mark.parametrize("rope", list(ROPES))
def test_generated_rotary_turns_as_the_reference(rotated, rope):
    target, cases = rotated
    spec, found, inputs, runs = cases[rope]
    ours = Rotary(spec.mla.rope, spec.mla.qk_rope_head_dim)
    for device, theirs in runs.items():
        what = f"{target} {rope} ({device} branch)"
        assert theirs["kind"] == ("DeepseekScalingRotaryEmbedding" if rope == "yarn" else "RotaryEmbedding"), what
        assert_close(theirs["q"], ours.rotate(inputs["q"], inputs["positions"]), "fp32_kernel", f"{what}: q")
        assert_close(theirs["k"], ours.rotate(inputs["k"], inputs["positions"]), "fp32_kernel", f"{what}: k")
    assert eval(found["scale"], {"qk": spec.mla.qk_head_dim}) == pytest.approx(spec.mla.softmax_scale, rel=1e-12)
    positions = "positions" if target == "vllm" else "forward_batch.positions"
    assert f"= self.rotary_emb({positions}, q_rope, k_rope.unsqueeze(1))" in generated(target, spec)  # as probed


def test_nope_models_build_no_rotary():
    for target in TARGETS:
        source = generated(target, tiny_k3_spec(5))
        assert "rotary" not in source and "nothing is rotated" in source
        assert latent_attention_init(source) == {"scale": "qk ** (-0.5)"}
