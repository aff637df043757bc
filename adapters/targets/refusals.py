"""What each target cannot honour of a spec, one line per field (the field, its value, the target). Plain data
checks, no torch: `integrate run` asks them before any stage runs, and each generator raises the first of its own.

    refusals("vllm", spec) -> ["kda.gate.rank = 32 is not supported by target vllm: ...", ...]
"""

from __future__ import annotations

from dayone.adapters.megatron.refusals import megatron_refusals
from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common
from dayone.spec.schema import ModelSpec

# vLLM's KimiGatedDeltaNetAttention sizes its low-rank gate factors by head_dim and accepts safe-gate lower bounds in
# [KDA_LOWER_BOUND_MIN, 0) (vllm/model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py).
KDA_LOWER_BOUND_MIN = -5.0


def refusals(target: str, spec: ModelSpec) -> list[str]:
    """Every field of `spec` that `target`'s generated code cannot honour."""
    if target in ("miles", "megatron-bridge"):
        return megatron_refusals(spec)
    return {"sglang": sglang_refusals, "vllm": vllm_refusals}[target](spec)


def vllm_refusals(spec: ModelSpec) -> list[str]:
    """Spec fields the vLLM model template does not honour: a YaRN cache shorter than the context, and what vLLM's
    KDA layer cannot hold."""
    release = RELEASES["vllm"].version
    out = []
    if (line := common.yarn_positions_refusal(spec, "vllm")) is not None:
        out.append(f"{spec.name}: {line}")
    k = spec.kda
    if k is None:
        return out
    ranks = {"kda.gate.rank": k.gate.rank, "kda.output_gate.rank": k.output_gate.rank}
    if k.output_gate.kind != "low_rank":
        del ranks["kda.output_gate.rank"]
    for field, rank in ranks.items():
        if rank is not None and rank != k.head_dim:
            out.append(
                f"{spec.name}: {field} = {rank} is not supported by target vllm: vLLM {release}'s KDA layer needs it "
                f"equal to kda.head_dim ({k.head_dim})"
            )
    lower = k.gate.lower_bound
    if lower is not None and not KDA_LOWER_BOUND_MIN <= lower < 0:
        out.append(
            f"{spec.name}: kda.gate.lower_bound = {lower} is not supported by target vllm: vLLM {release}'s KDA layer "
            f"takes lower bounds in [{KDA_LOWER_BOUND_MIN}, 0)"
        )
    return out


def sglang_refusals(spec: ModelSpec) -> list[str]:
    """Spec fields the SGLang model template does not honour, one line each (field, value, target)."""
    out = []
    if (line := common.yarn_positions_refusal(spec, "sglang")) is not None:
        out.append(line)
    if spec.tie_word_embeddings:
        out.append("tie_word_embeddings: true is not supported by target sglang: lm_head is loaded on its own")
    if spec.moe is not None:
        router, experts = spec.moe.router, spec.moe.num_experts
        if router.num_groups > 1 and (experts % router.num_groups or experts // router.num_groups < 2):
            out.append(
                f"moe.router.num_groups: {router.num_groups} is not supported by target sglang: group-limited "
                f"top-k needs {experts} experts in equal groups of two or more"
            )
        if router.topk_groups > router.num_groups:
            out.append(
                f"moe.router.topk_groups: {router.topk_groups} exceeds num_groups {router.num_groups} (target sglang)"
            )
    if spec.quantization is not None and spec.quantization.group_size != 32:
        out.append(
            f"quantization.group_size: {spec.quantization.group_size} is not supported by target sglang: its MXFP4 "
            "MoE method reads groups of 32"
        )
    return out
