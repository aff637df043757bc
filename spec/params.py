"""Parameter counts from the manifest: total, activated per token, and the bytes a decode step reads.

MXFP4 `weight_packed` holds two parameters per byte; its `weight_scale` is metadata, not parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dayone.spec.manifest import DTYPE_BYTES, Manifest
from dayone.spec.schema import ModelSpec


def param_count(role: str, shape: tuple[int, ...]) -> int:
    if role.endswith(".scale"):
        return 0
    if role.endswith(".packed"):
        return math.prod(shape) * 2
    return math.prod(shape)


@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter in the checkpoint, passthrough (vision) included
    language: int
    passthrough: int
    activated: int  # language parameters a token uses: all but the routed experts it is not sent to
    routed_expert: int  # all routed-expert parameters


def count_params(spec: ModelSpec, manifest: Manifest) -> ParamCounts:
    language = passthrough = routed = 0
    for row in manifest.summaries():
        n = param_count(row.role, row.shape) * row.count
        if row.role.startswith("passthrough."):
            passthrough += n
        else:
            language += n
            if row.routed_expert:
                routed += n
    share = spec.moe.experts_per_token / spec.moe.num_experts if spec.moe else 0.0
    activated = language - routed + round(routed * share)
    return ParamCounts(language + passthrough, language, passthrough, activated, routed)


def decode_bytes_per_token(spec: ModelSpec, manifest: Manifest) -> int:
    """Weight bytes one decode step reads at batch 1: every language tensor except the embedding table (one row is
    read) and the routed experts a token is not sent to; routed experts counted at their stored size."""
    dense = expert = 0
    for row in manifest.summaries():
        if row.role.startswith("passthrough.") or row.role == "embed":
            continue
        nbytes = row.count * math.prod(row.shape) * DTYPE_BYTES[row.dtype]
        if row.routed_expert:
            expert += nbytes
        else:
            dense += nbytes
    share = spec.moe.experts_per_token / spec.moe.num_experts if spec.moe else 0.0
    return dense + round(expert * share) + spec.hidden_size * 2
