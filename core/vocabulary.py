"""dayone's words, each written once: the targets, the stages of a run, the statuses a check ends in, and the dtype
names. Every layer imports them from here; no other module keeps its own list of these facts (a module adds what is
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


def short_dtype(name: str) -> str:
    """bfloat16 -> bf16 (already-short names pass through)."""
    return SHORT_DTYPE.get(name, name)
