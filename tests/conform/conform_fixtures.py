"""Helpers for the conformance tests: a shipped spec at tiny scale written as a release-format checkpoint (the
synth code), its vLLM adapter generated, and planted mistakes made by editing the generated files."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import torch
from dayone.adapters.targets import common, vllm
from dayone.checkpoint.writer import write_checkpoint
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import Tensor, build_manifest
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from dayone.synth.scale import scaled_spec
from dayone.synth.write import SyntheticData, write_synthetic

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


def prepare(root: Path, spec, load_only: bool = False) -> tuple[Path, Path]:
    """(checkpoint folder, generated vLLM adapter folder) of `spec` under root; the checkpoint's weights drawn by
    synth, or patterned (patterned_bytes) when the test only loads them."""
    checkpoint = root / "checkpoint"
    if load_only:
        patterned_checkpoint(spec, checkpoint)
    else:
        write_synthetic(spec, checkpoint, seed=0, num_shards=2)
    adapter = root / "generated" / "vllm"
    common.write_tree(adapter, vllm.files(spec))
    return checkpoint, adapter


# Patterned bytes for the large tensors of a checkpoint that only has to load (no forward reads it): every 16-bit
# (32-bit) element keeps its sign and mantissa bits from a hash of (tensor name, position) and gets a fixed exponent
# (2^-7: finite, normal), every MXFP4 scale byte lies in 120..127 (2^-7..1, never the NaN byte 255), packed codes are
# any byte. A tensor read from the wrong file, rows or offset differs from its own. Drawing and quantizing the
# faithful K3's 2.2 billion weights (dayone.synth) took half a minute of one core, this about 8 s. The small
# tensors (norms, gates' A_log with its zero padding, biases) but the MXFP4 pairs are synth's own: the release
# format has rules for them.
PATTERNED_FROM_BYTES = 1 << 20
_KEEP_SET = {  # dtype (role suffix for the MXFP4 pair) -> (bits kept from the hash, bits set), per 64-bit word
    "BF16": (0x807F807F807F807F, 0x3C003C003C003C00),
    "F16": (0x83FF83FF83FF83FF, 0x2000200020002000),
    "F32": (0x807FFFFF807FFFFF, 0x3C0000003C000000),
    ".scale": (0x0707070707070707, 0x7878787878787878),
    ".packed": (-1, 0),
}


def patterned_bytes(t: Tensor) -> bytes:
    """The raw bytes of manifest entry t, patterned as above."""
    keep, bits = _KEEP_SET[next((s for s in (".scale", ".packed") if t.role.endswith(s)), t.dtype)]
    words = torch.arange((t.nbytes + 7) // 8, dtype=torch.int64)
    words.mul_(-7046029254386353131).add_(zlib.crc32(t.name.encode()))  # 0x9E3779B97F4A7C15, wrapping
    words.bitwise_xor_(words >> 29).bitwise_and_(_as_int64(keep)).bitwise_or_(_as_int64(bits))
    return words.numpy().tobytes()[: t.nbytes]


def _as_int64(mask: int) -> int:
    return mask - (1 << 64) if mask >= 1 << 63 else mask


def patterned_checkpoint(spec, folder: Path, num_shards: int = 2) -> Path:
    """A release-format checkpoint of `spec` whose large tensors are patterned_bytes, the others drawn by synth: for
    tests that load it, not compute with it."""
    drawn = SyntheticData(spec, seed=0)

    def data(t: Tensor) -> bytes:
        large = t.nbytes >= PATTERNED_FROM_BYTES or t.role.endswith((".packed", ".scale"))  # a pair is one draw
        return patterned_bytes(t) if large else drawn(t)

    return write_checkpoint(folder, to_hf_config(spec), list(build_manifest(spec).tensors), num_shards, data=data)


def plant(adapter: Path, file: str, old: str, new: str, count: int = 1) -> None:
    """Replace `old` by `new` in a generated file of the adapter (each planted mistake is one such edit)."""
    (path,) = adapter.glob(f"*/{file}")
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


# Mistakes planted in copies of the shipped Kimi Linear adapter (tests/conform/conftest.py's SPEC), each one edit of a
# generated file: name -> (file, old, new, count, world size, forward dtypes). The first four are caught at
# "accepted" or "loaded", so they run no forward (the driver discards a forward after a load judged wrong; at world
# size 2 it would start two more vLLM processes); the last is caught only by the forward.
PLANTED_VLLM = {
    "no-embed": ("model.py", "def embed_input_ids(", "def embed_tokens_of(", 1, 1, ()),
    "renamed": ("model.py", "self.post_attention_layernorm", "self.pre_mlp_layernorm", 2, 1, ()),
    "dropped": ("weight_table.py", 'Rule("model.norm.weight", "model.norm.weight"',
                'Rule("model.norm.weigh", "model.norm.weight"', 1, 1, ()),
    "shard-dim": ("model.py", "self.o_proj = RowParallelLinear(", "self.o_proj = ColumnParallelLinear(", 1, 2, ()),
    # a routed expert weighed 1% too heavily on the CPU path
    "forward": ("cpu.py", "y * weights[rows, slots, None]", "y * weights[rows, slots, None] * 1.01", 1, 1,
                ("float32",)),
}  # fmt: skip


# Spec fields the vLLM target honours, each shown in the generated model (tests/conform/test_spec_variants.py), and all
# of them together conformed in vLLM: name -> (updates of the tiny K3, text present, text absent).
HONOURED = {
    "softmax router": (
        {"moe": {"router": {"activation": "softmax"}}},
        'scoring_func="softmax"',
        'scoring_func="sigmoid"',
    ),
    "group-limited router": (
        {"moe": {"router": {"num_groups": 2, "topk_groups": 1}}},
        "use_grouped_topk=True,\n            num_expert_group=2,\n            topk_group=1,",
        None,
    ),
    "no correction bias": ({"moe": {"router": {"correction_bias": False}}}, "class Router", "e_score_correction_bias"),
    "gate bound": ({"kda": {"gate": {"lower_bound": -3.0}}}, '"gate_lower_bound": -3.0', None),
    "no q LoRA": ({"mla": {"q_lora_rank": None}}, "self.q_proj = ColumnParallelLinear(", "q_a_layernorm"),
    "no output gate": ({"mla": {"output_gate": False}}, "class LatentAttention", "self.g_proj = ColumnParallelLinear"),
    "dense prefix of 2": ({"layout": {"ffn": "2 x [dense] + 2 x [moe]"}}, '"dense": layers(range(2))', None),
    # DeepSeek-V3's YaRN rope (mscale != mscale_all_dim: the cos/sin amplitude too), 32768 x 32 positions cached
    "RoPE MLA": (
        {"mla": {"nope": False, "rope": YARN_ROPE}},
        '"rope_type": "deepseek_yarn"',
        "NoPE: nothing is rotated",
    ),
}


def honoured_together() -> dict:
    """Every HONOURED variant's updates merged into one."""
    combined: dict = {}
    for updates, _, _ in HONOURED.values():
        for key, value in updates.items():
            combined.setdefault(key, {})
            for k, v in value.items():
                if isinstance(v, dict):
                    combined[key].setdefault(k, {}).update(v)
                else:
                    combined[key][k] = v
    return combined


def k3_variant(updates: dict) -> ModelSpec:
    """The tiny K3 with `updates` (model_fixtures.with_updates: validated as a spec)."""
    from model_fixtures import with_updates

    return with_updates(tiny("kimi-k3"), updates)
