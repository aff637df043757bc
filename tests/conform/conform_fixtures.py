"""Helpers for the conformance tests: a shipped spec at tiny scale written as a release-format checkpoint (the
synth code), its vLLM adapter generated, and planted mistakes made by editing the generated files."""

from __future__ import annotations

import sys
from pathlib import Path

from dayone.adapters.targets import common, vllm
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from dayone.synth.scale import scaled_spec
from dayone.synth.write import write_synthetic

# The model tests' fixtures (spec variants through with_updates), as tests/generate and tests/validate use them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

# DeepSeek-V3's YaRN rope (mscale != mscale_all_dim: the cos/sin amplitude too), 32768 x 32 positions cached: both
# engines honour it (SGLang's CPU rotary embedding builds it).
YARN_ROPE = {
    "theta": 50000.0,
    "scaling": {"kind": "yarn", "factor": 32.0, "original_max_position_embeddings": 32768, "mscale": 1.0,
                "mscale_all_dim": 0.7},
}  # fmt: skip
# A YaRN rope whose engine position cache (16 x 2 positions) is shorter than the model's context: both engines refuse.
SHORT_YARN_MLA = {
    "mla": {"nope": False, "rope": {"theta": 1e4, "scaling": {"kind": "yarn", "factor": 2.0,
                                                              "original_max_position_embeddings": 16}}},
}  # fmt: skip

# A new model type of the K3 family by data alone: its own model_type and architecture, conventions extending kimi_k3.
NEW_MODEL_TYPE = {
    "name": "kimi-k4x",
    "hf": {"model_type": "kimi_k4x", "architecture": "KimiK4xForConditionalGeneration"},
    "conventions": {"extends": "kimi_k3"},
}

# 4 layers keep every layer kind of both shipped specs (KDA, MLA, the dense prefix and MoE).
LAYERS = 4


# The spec whose experts stay at synth's tiny width (32: one MXFP4 scale group per expert row, as in the README's
# demo): at world size 2 they do not split by tensor parallelism and the engines spread them by expert parallelism
# (the README run's conformance shows it: tests/run/test_demo_conformance.py). The other shipped spec's experts are
# widened so that world size 2 splits every expert over both ranks: each engine runs both ways.
EXPERT_PARALLEL_AT_WS2 = "kimi-k3"


def tiny(name: str, layers: int = LAYERS):
    """The spec at synth's tiny scale; except for EXPERT_PARALLEL_AT_WS2, its routed experts 64 wide: one
    32-element MXFP4 scale block per rank at world size 2."""
    spec = scaled_spec(load_spec(name), "tiny", layers)
    if name == EXPERT_PARALLEL_AT_WS2:
        return spec
    data = spec_to_dict(spec)
    data["moe"]["expert_intermediate_size"] = 64
    data["moe"]["shared_intermediate_size"] = 64 * spec.moe.num_shared_experts
    return ModelSpec.model_validate(data)


def prepare(root: Path, spec) -> tuple[Path, Path]:
    """(checkpoint folder, generated vLLM adapter folder) of `spec` under root."""
    checkpoint = root / "checkpoint"
    write_synthetic(spec, checkpoint, seed=0, num_shards=2)
    adapter = root / "generated" / "vllm"
    common.write_tree(adapter, vllm.files(spec))
    return checkpoint, adapter


def plant(adapter: Path, file: str, old: str, new: str, count: int = 1) -> None:
    """Replace `old` by `new` in a generated file of the adapter (each planted mistake is one such edit)."""
    (path,) = adapter.glob(f"*/{file}")
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))
