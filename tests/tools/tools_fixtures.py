"""Small K3-shaped checkpoints on disk for the checkpoint tools: real MXFP4 experts, vision tower kept.

The spec is kimi-k3 with tiny widths; the tensors are the manifest of the spec derived back from the written
config.json, so `integrate inspect` sees exactly what the release format promises. MXFP4 bytes are random, with
some scale rows forced to the edge bytes (0, 1, 254, 255) so the dequantization's special cases are exercised.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from dayone.checkpoint.reader import INDEX_NAME
from dayone.checkpoint.writer import shard_name, write_checkpoint, write_shard
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.manifest import Tensor, build_manifest
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec

TORCH_DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "U8": torch.uint8}


def tiny_k3_spec(num_layers: int = 25, num_experts: int = 8) -> ModelSpec:
    """kimi-k3 in miniature: 3:1 KDA:MLA with a final MLA, dense layer 0, attention residuals (block 12)."""
    data = spec_to_dict(load_spec("kimi-k3"))
    data.pop("release", None)
    if num_layers % 4 not in (0, 1):
        raise ValueError("num_layers must be 4n or 4n + 1")
    data["layout"] = {
        "attention": f"{num_layers // 4} x [kda kda kda mla]" + " + [mla]" * (num_layers % 4),
        "ffn": f"[dense] + {num_layers - 1} x [moe]",
    }
    data.update(num_layers=num_layers, hidden_size=64, vocab_size=128, dense_intermediate_size=96)
    data["token_ids"] = {"bos": 1, "eos": 2, "pad": 0, "media_placeholder": 3}
    data["kda"].update(
        num_heads=2, head_dim=16, a_log_shape=[128], gate={"kind": "safe", "lower_bound": -5.0, "rank": 16}
    )
    data["mla"].update(num_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                       v_head_dim=16)  # fmt: skip
    data["moe"].update(num_experts=num_experts, experts_per_token=2, expert_intermediate_size=64,
                       num_shared_experts=2, shared_intermediate_size=128, latent_size=32)  # fmt: skip
    data["passthrough"]["vision"].update(num_layers=2, hidden_size=32, intermediate_size=64, qkv_hidden_size=48,
                                         num_heads=2, patch_size=2, pos_emb_height=4, pos_emb_width=4,
                                         pos_emb_time=1, mm_hidden_size=32)  # fmt: skip
    spec = ModelSpec.model_validate(data)
    # What a reader derives from the written config.json (tests compare against that, not the hand-made spec).
    return derive_spec(to_hf_config(spec), "tiny-k3")


def tiny_kimi_linear_spec() -> ModelSpec:
    """kimi-linear-48b-a3b in miniature: plain residuals, low-rank KDA gate, 'model.' prefix, BF16 experts."""
    data = spec_to_dict(load_spec("kimi-linear-48b-a3b"))
    data.pop("release", None)
    data.update(num_layers=7, hidden_size=64, vocab_size=128, dense_intermediate_size=96)
    data["layout"] = {"attention": "[kda kda kda mla kda kda mla]", "ffn": "[dense] + 6 x [moe]"}
    data["token_ids"] = {"bos": 1, "eos": 2, "pad": 0}
    data["kda"].update(num_heads=2, head_dim=16, a_log_shape=[1, 1, 2, 1], gate={"kind": "plain", "rank": 16},
                       output_gate={"kind": "low_rank", "rank": 16})  # fmt: skip
    data["mla"].update(num_heads=2, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)
    data["moe"].update(num_experts=6, experts_per_token=2, expert_intermediate_size=32, shared_intermediate_size=32)
    return derive_spec(to_hf_config(ModelSpec.model_validate(data)), "tiny-kimi-linear")


def tensor_data(t: Tensor, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if t.dtype == "U8":
        if t.name.endswith("weight_scale"):
            scale = torch.randint(110, 135, t.shape, generator=gen, dtype=torch.uint8)
            for row, byte in zip(range(min(4, t.shape[0])), (0, 1, 254, 255), strict=False):
                scale[row, 0] = byte
            return scale
        return torch.randint(0, 256, t.shape, generator=gen, dtype=torch.uint8)
    return torch.randn(t.shape, generator=gen).to(TORCH_DTYPES[t.dtype])


def tensor_bytes(t: Tensor, seed: int) -> bytes:
    data = tensor_data(t, seed).contiguous()
    return data.view(torch.uint8).numpy().tobytes() if data.numel() else b""


def write_tiny_k3(path: Path, spec: ModelSpec, num_shards: int = 3, seed: int = 0, extra: dict | None = None) -> Path:
    """Write `spec` as a checkpoint folder with deterministic random tensors; returns the folder."""
    tensors = list(build_manifest(spec).tensors)
    seeds = {t.name: seed * 1_000_003 + i for i, t in enumerate(tensors)}
    extra_files = {"tokenizer_config.json": '{"model_max_length": 1048576}\n'}
    extra_files.update(extra or {})
    return write_checkpoint(
        Path(path), to_hf_config(spec), tensors, num_shards, data=lambda t: tensor_bytes(t, seeds[t.name]),
        extra_files=extra_files,
    )  # fmt: skip


def expert_bytes(spec: ModelSpec) -> int:
    return sum(math.prod(t.shape) for t in build_manifest(spec).tensors if t.dtype == "U8")


def write_split_pair(path: Path, spec: ModelSpec, packed: str) -> Path:
    """Two shards split right after tensor `packed` (a weight_packed), so its weight_scale is in the second file."""
    tensors = list(build_manifest(spec).tensors)
    cut = next(i for i, t in enumerate(tensors) if t.name == packed) + 1
    path.mkdir(parents=True)
    weight_map = {}
    for i, shard in enumerate((tensors[:cut], tensors[cut:])):
        write_shard(path / shard_name(i, 2), shard, lambda t: tensor_bytes(t, 0))
        weight_map.update((t.name, shard_name(i, 2)) for t in shard)
    (path / INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (path / "config.json").write_text(json.dumps(to_hf_config(spec)))
    return path
