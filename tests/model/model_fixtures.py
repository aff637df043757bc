"""Tiny checkpoints for the model tests: Kimi Linear ones written by transformers, and a K3-shaped one.

Weights are re-drawn "well scaled" (matrices ~ N(0, WEIGHT_SCALE^2 / fan_in), norms ~ 1 + noise) so every layer
moves the logits; transformers' own init (std 0.02) would leave logits near zero and make comparisons trivial.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from dayone.kernels.mxfp4 import quantize_mxfp4
from dayone.spec.derive import derive_spec
from dayone.spec.manifest import build_manifest
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from safetensors.torch import load_file

# Matrices at half the unit scale: random KDA layers with tiny heads are ill-conditioned (q.k of random unit vectors
# is small, and the per-head o_norm rescales its error back up), so at unit scale bf16 rounding alone compounds past
# the bf16_model row within four layers. Half scale keeps every sublayer active and the comparison meaningful.
WEIGHT_SCALE = 0.5

# Kimi Linear variants: dense first layer or not, head and expert counts, q LoRA on and off.
KIMI_LINEAR_VARIANTS = {
    "dense0-noqlora": {},
    "nodense-qlora": {
        "first_k_dense_replace": 0,
        "q_lora_rank": 16,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_local_experts": 6,
        "num_experts_per_tok": 3,
        "n_shared_experts": 2,
        "linear_attn_config": {
            "kda_layers": [1, 3],
            "full_attn_layers": [2, 4],
            "head_dim": 8,
            "num_heads": 4,
            "short_conv_kernel_size": 3,
        },
    },
    "dense2-qlora-noshared": {
        "first_k_dense_replace": 2,
        "q_lora_rank": 24,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "n_shared_experts": 0,
        "routed_scaling_factor": 1.0,
    },
}


def kimi_linear_config(**overrides):
    from transformers import KimiLinearConfig

    linear = {"kda_layers": [1, 2, 3], "full_attn_layers": [4], "head_dim": 8, "num_heads": 2,
              "short_conv_kernel_size": 4}  # fmt: skip
    kw = {
        "vocab_size": 96, "hidden_size": 32, "intermediate_size": 48, "moe_intermediate_size": 16,
        "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 2, "kv_lora_rank": 16,
        "q_lora_rank": None, "qk_rope_head_dim": 8, "v_head_dim": 8, "qk_nope_head_dim": 8, "num_local_experts": 4,
        "num_experts_per_tok": 2, "n_shared_experts": 1, "routed_scaling_factor": 2.446, "pad_token_id": 0,
        "bos_token_id": 1, "eos_token_id": 2, "first_k_dense_replace": 1, "linear_attn_config": linear,
    }  # fmt: skip
    kw.update(overrides)
    return KimiLinearConfig(**kw)


@torch.no_grad()
def rescale_(model: torch.nn.Module, seed: int) -> None:
    """Re-draw a transformers model's weights, well scaled (see the module docstring and WEIGHT_SCALE)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith(("A_log", "dt_bias")):
            continue  # keep transformers' (fla's) init: sensible decays
        if "norm" in name:
            p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
        elif "conv" in name:
            p.copy_(0.5 * torch.randn(p.shape, generator=gen))
        elif p.dim() == 1:
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        else:
            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]) * WEIGHT_SCALE)
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.1 * torch.randn(b.shape, generator=gen))


def write_kimi_linear(path: Path, seed: int = 0, **overrides):
    """save_pretrained a tiny KimiLinearForCausalLM in fp32; returns (hf model in eval mode, spec, tensors)."""
    from transformers import KimiLinearForCausalLM

    torch.manual_seed(seed)
    hf = KimiLinearForCausalLM(kimi_linear_config(**overrides)).float().eval()
    rescale_(hf, seed)
    hf.save_pretrained(path)
    tensors = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        tensors.update(load_file(f))
    spec = derive_spec(
        json.loads((Path(path) / "config.json").read_text()), "tiny-kimi-linear", tensor_names=set(tensors)
    )
    # derive_spec follows the family's convention (q_a/kv_a layernorm eps 1e-6): the oracle comparison checks it.
    return hf, spec, tensors


def with_updates(spec: ModelSpec, updates: dict) -> ModelSpec:
    """A validated copy of `spec` with nested fields replaced."""
    data = spec_to_dict(spec)

    def merge(d: dict, u: dict) -> None:
        for k, v in u.items():
            if isinstance(v, dict) and isinstance(d.get(k), dict):
                merge(d[k], v)
            else:
                d[k] = v

    merge(data, updates)
    return ModelSpec.model_validate(data)


def tiny_k3_spec(num_layers: int = 93) -> ModelSpec:
    """kimi-k3 with tiny widths and all its features: safe gate, full-rank KDA gate, padded A_log, q-LoRA MLA with
    output gate, SiTU, latent MoE with norm, MXFP4 experts, attention residuals (block 12), shared experts."""
    data = spec_to_dict(load_spec("kimi-k3"))
    data.pop("passthrough", None)
    data.pop("release", None)
    block = data["layout"]
    if num_layers != 93:
        block["attention"] = f"{num_layers // 4} x [kda kda kda mla]" + " + [mla]" * (num_layers % 4 != 0)
        block["ffn"] = f"[dense] + {num_layers - 1} x [moe]"
        if num_layers % 4 not in (0, 1):
            raise ValueError("num_layers must be 4n or 4n + 1")
    data.update(num_layers=num_layers, hidden_size=64, vocab_size=128, token_ids={"bos": 1, "eos": 2, "pad": 0},
                dense_intermediate_size=96)  # fmt: skip
    data["kda"].update(
        num_heads=2, head_dim=16, a_log_shape=[4], gate={"kind": "safe", "lower_bound": -5.0, "rank": 16}
    )
    data["mla"].update(num_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                       v_head_dim=16)  # fmt: skip
    data["moe"].update(num_experts=8, experts_per_token=2, expert_intermediate_size=32, num_shared_experts=2,
                       shared_intermediate_size=64, latent_size=32)  # fmt: skip
    return ModelSpec.model_validate(data)


def kernels_k3_spec() -> ModelSpec:
    """tiny_k3_spec(5) with attention-residual blocks of 2 layers (snapshots at 0, 2, 4: the bank grows twice
    inside the stack) for the kernel-backend tests; widths stay >= 16 where tl.dot needs them."""
    return with_updates(tiny_k3_spec(5), {"residual": {"block_size": 2}})


def random_checkpoint(spec: ModelSpec, seed: int = 0) -> dict[str, torch.Tensor]:
    """Well-scaled random tensors for every manifest entry, in the manifest's dtypes; experts MXFP4 when quantized."""
    gen = torch.Generator().manual_seed(seed)
    dtypes = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}
    out: dict[str, torch.Tensor] = {}
    pending: dict[str, torch.Tensor] = {}
    for t in build_manifest(spec).tensors:
        role, shape = t.role, t.shape
        if role.endswith((".packed", ".scale")):
            base = t.name.rsplit(".", 1)[0]
            if base not in pending:
                rows, cols = shape[0], shape[1] * 2 if role.endswith(".packed") else shape[1] * 32
                pending[base] = torch.randn(rows, cols, generator=gen) / math.sqrt(cols) * WEIGHT_SCALE
                packed, scale = quantize_mxfp4(pending[base])
                out[base + ".weight_packed"], out[base + ".weight_scale"] = packed, scale
            continue
        if role == "kda.a_log":
            value = torch.zeros(shape).view(-1)
            heads = spec.kda.num_heads
            value[:heads] = torch.empty(heads).uniform_(1, 16, generator=gen).log()
            value = value.view(shape)
        elif role == "kda.dt_bias":
            # fla's init (as transformers'): dt log-uniform in [1e-3, 1e-1], dt_bias = softplus^-1(dt)
            dt = torch.empty(shape).uniform_(math.log(1e-3), math.log(1e-1), generator=gen).exp()
            value = dt + torch.log(-torch.expm1(-dt))
        elif role == "embed":
            value = torch.randn(shape, generator=gen)
        elif role.endswith("norm") or role == "final_norm":
            value = 1 + 0.1 * torch.randn(shape, generator=gen)
        elif role.startswith("kda.conv"):
            value = 0.5 * torch.randn(shape, generator=gen)
        elif len(shape) == 1:
            value = 0.1 * torch.randn(shape, generator=gen)
        else:
            value = torch.randn(shape, generator=gen) / math.sqrt(shape[-1]) * WEIGHT_SCALE
        out[t.name] = value.to(dtypes[t.dtype])
    return out
