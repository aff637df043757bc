"""dayone's words, each written once: the targets, the stages of a run, the statuses a check ends in, the dtype
names, the capture points tiers are compared at and the names of a routed expert's tensors. Every layer imports them from here; no other module keeps its own list of these facts (a module adds what is
its own: a target's weight layout, a stage's inputs, a kernel's tile sizes).

The code shipped inside generated packages (dayone.adapters.weightmap.walk and friends, copied verbatim) cannot
import dayone and keeps the few names it needs itself.
"""

from __future__ import annotations

from typing import Literal

# ----- targets: what dayone generates adapters for, serving engines first
TARGETS = ("sglang", "vllm", "miles", "megatron-bridge")
Target = Literal["sglang", "vllm", "miles", "megatron-bridge"]
ENGINES = ("sglang", "vllm")  # serving engines: conformance runs them; their adapters register a model class
TRAINERS = ("miles", "megatron-bridge")  # RL trainers on Megatron: one Megatron model, two packagings
TARGET_TITLES = {"sglang": "SGLang", "vllm": "vLLM", "miles": "Miles", "megatron-bridge": "Megatron-Bridge"}

# ----- the stages of `integrate run` that leave evidence for the dashboard, in run order
STAGES = ("spec", "coverage", "generate", "conform", "compile", "validate", "package", "publish")
Stage = Literal["spec", "coverage", "generate", "conform", "compile", "validate", "package", "publish"]
TARGETED_STAGES = frozenset({"generate", "conform", "validate", "package"})  # one result per target

# ----- the GPU architectures kernels are compiled for
ARCHS = ("sm_90", "sm_100")
Arch = Literal["sm_90", "sm_100"]

# ----- statuses. A stage is "partial" when it did all this machine can, failed nothing, and left work not run.
PASS, PARTIAL, FAIL, NOT_RUN = "pass", "partial", "fail", "not run"
Status = Literal["pass", "fail", "not run"]  # of a check or a conformance level (never partial)
StageStatus = Literal["pass", "partial", "fail", "not run"]

# ----- dtypes: the spec's (torch's) names, and the short names kernels and metric rows use
DTYPES = ("bfloat16", "float16", "float32")
DType = Literal["bfloat16", "float16", "float32"]
SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
SAFETENSORS_DTYPE = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


# ----- capture points: the named intermediate tensors of a forward pass that validate and conform compare, tier
# against tier (dayone.adapters.model.capture records them and documents their shapes). A layer's point is named
# "layers.{i}.<point>" (layer_point); embed comes before the layers, HEAD_POINTS after them, in order.
class Point:
    """The capture points by name, for code that records or reads one: Point.ATTN_OUT is "attn_out"."""

    EMBED = "embed"
    ATTN_RES, ATTN_IN, ATTN_OUT, MLP_RES, MLP_IN = "attn_res", "attn_in", "attn_out", "mlp_res", "mlp_in"
    ROUTER_LOGITS, TOPK_IDS, OWN_TOPK_IDS, TOPK_WEIGHTS = "router_logits", "topk_ids", "own_topk_ids", "topk_weights"
    LATENT_DOWN, LATENT_COMBINED = "latent_down", "latent_combined"
    LATENT_NORMED, LATENT_UP = "latent_normed", "latent_up"
    MLP_OUT, OUT = "mlp_out", "out"
    OUTPUT_RES, FINAL_NORM, LOGITS = "output_res", "final_norm", "logits"


EMBED = Point.EMBED
LAYER_POINTS = (
    Point.ATTN_RES, Point.ATTN_IN, Point.ATTN_OUT, Point.MLP_RES, Point.MLP_IN, Point.ROUTER_LOGITS, Point.TOPK_IDS,
    Point.OWN_TOPK_IDS, Point.TOPK_WEIGHTS, Point.LATENT_DOWN, Point.LATENT_COMBINED, Point.LATENT_NORMED,
    Point.LATENT_UP, Point.MLP_OUT, Point.OUT,
)  # fmt: skip
ROUTE_POINTS = (Point.TOPK_IDS, Point.OWN_TOPK_IDS)  # expert ids: compared by agreement, not as tensors
HEAD_POINTS = (Point.OUTPUT_RES, Point.FINAL_NORM, Point.LOGITS)


def layer_point(layer: int | str, point: str) -> str:
    """The name of a layer's capture point: layer_point(3, "out") -> "layers.3.out" ("*" for every layer)."""
    return f"layers.{layer}.{point}"


# ----- routed experts: the projections of one expert, and the two stored tensors of an MXFP4 weight
# (compressed-tensors mxfp4-pack-quantized: `X.weight_packed` U8 [out, in/2] + `X.weight_scale` U8 [out, in/32])
EXPERT_PROJECTIONS = ("gate", "up", "down")
MXFP4_PARTS = {"packed": "weight_packed", "scale": "weight_scale"}


def short_dtype(name: str) -> str:
    """bfloat16 -> bf16 (already-short names pass through)."""
    return SHORT_DTYPE.get(name, name)
