"""Checkpoint quirks, the one table of them: where a stored tensor differs from the parameter it fills, and how.

Every layout (dayone's own model, SGLang, vLLM, Megatron) is built through this table, so a quirk is translated
the same way for the model `validate` judges and for the engines it vouches for:
    A_log        stored [1, 1, heads + padding]; the parameter holds [heads], the padding must be zero (a_log)
    MXFP4 pairs  `weight_packed` [out, in/2] u8 + `weight_scale` [out, in/32] u8; kept as the two bytes tensors, or
                 dequantized (mxfp4, the scale consumed with its packed twin) into a float [out, in]
    passthrough  tensors the text model does not hold (a vision tower): named, never loaded
    float32      roles the checkpoint stores in fp32 (the spec's `checkpoint.float32`) keep fp32 parameters
    prefixes     come with the manifest's names (the spec's `checkpoint.prefix`); each layout names its targets
"""

from __future__ import annotations

import torch
from dayone.adapters.weightmap.mxfp4 import dequantize_mxfp4_reference
from dayone.core.vocabulary import MXFP4_PARTS, SAFETENSORS_DTYPE
from dayone.spec.schema import ModelSpec

# role (or role prefix) -> the transform every layout applies to its tensor (walk.read_source / walk.from_full)
TRANSFORMS = {"kda.a_log": "a_log", "passthrough": "passthrough"}
# The parameter dtype of each stored dtype (manifest dtype strings); fp32-stored roles stay fp32.
STORE_DTYPE = {stored: name for name, stored in SAFETENSORS_DTYPE.items()} | {"U8": "uint8"}


def transform_of(role: str, mxfp4: str) -> str | None:
    """The transform of `role`'s tensor ("copy", "a_log", "passthrough", "mxfp4"), or None for an MXFP4 scale that
    its packed twin's rule consumes (mxfp4 "dequantize")."""
    for prefix, transform in TRANSFORMS.items():
        if role == prefix or role.startswith(prefix + "."):
            return transform
    if role.startswith("moe.expert.") and mxfp4 == "dequantize":
        if role.endswith(".scale"):
            return None
        if role.endswith(".packed"):
            return "mxfp4"
    return "copy"


def param_shape(spec: ModelSpec, shape: tuple[int, ...], transform: str) -> tuple[int, ...]:
    """The shape of the parameter a stored tensor of `shape` fills."""
    if transform == "a_log":
        return (spec.kda.num_heads,)
    if transform == "mxfp4":
        return (shape[0], shape[1] * 2)
    return shape


def param_dtype(spec: ModelSpec, dtype: str, transform: str) -> str:
    """The parameter's dtype: the stored one (fp32 roles stay fp32, MXFP4 bytes uint8); dequantized MXFP4 takes the
    checkpoint's float dtype."""
    return spec.checkpoint.dtype if transform == "mxfp4" else STORE_DTYPE[dtype]


def mxfp4_twin(scale_name: str) -> str:
    """The `weight_packed` tensor a `weight_scale` tensor belongs to."""
    return scale_name.removesuffix(MXFP4_PARTS["scale"]) + MXFP4_PARTS["packed"]


def is_mxfp4_scale_row(row) -> bool:
    """A walk.Row that copies an MXFP4 scale as bytes (packed experts): its pair is checked once both are loaded."""
    return row.rule.transform == "copy" and row.source.endswith("." + MXFP4_PARTS["scale"])


# The largest E8M0 scale byte under which every E2M1 value stays finite in fp32: 6 * 2^(252 - 127) = 0.75 * 2^128.
# From 253 up the codes' magnitudes decide (4 * 2^126 = 2^128 overflows, 0.5 * 2^126 does not; 255 is NaN).
MXFP4_FINITE_SCALE_MAX = 252


def mxfp4_finite(packed: torch.Tensor, scale: torch.Tensor) -> bool:
    """Whether an MXFP4 pair dequantizes to finite weights. A pair whose scale bytes all stay at or below
    MXFP4_FINITE_SCALE_MAX is finite whatever its codes (the usual case, decided from the scale bytes alone); any
    other is dequantized and looked at (a K3 expert's pair takes about a second on one CPU thread)."""
    if scale.numel() == 0 or int(scale.max()) <= MXFP4_FINITE_SCALE_MAX:
        return True
    return bool(torch.isfinite(dequantize_mxfp4_reference(packed, scale, torch.float32)).all())
