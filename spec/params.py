"""Parameter counts from the manifest: total, activated per token, and the bytes a decode step reads.

MXFP4 `weight_packed` holds two parameters per byte; its `weight_scale` is metadata, not parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from dayone.spec.manifest import Manifest, Tensor
from dayone.spec.schema import ModelSpec


def param_count(t: Tensor) -> int:
    if t.role.endswith(".scale"):
        return 0
    if t.role.endswith(".packed"):
        return t.numel * 2
    return t.numel


@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter in the checkpoint, passthrough (vision) included
    language: int
    passthrough: int
    activated: int  # language parameters a token uses: all but the routed experts it is not sent to
    routed_expert: int  # all routed-expert parameters


def count_params(spec: ModelSpec, manifest: Manifest) -> ParamCounts:
    language = passthrough = routed = 0
    for t in manifest.tensors:
        n = param_count(t)
        if t.role.startswith("passthrough."):
            passthrough += n
        else:
            language += n
            if t.expert is not None:
                routed += n
    share = spec.moe.experts_per_token / spec.moe.num_experts if spec.moe else 0.0
    activated = language - routed + round(routed * share)
    return ParamCounts(language + passthrough, language, passthrough, activated, routed)


def decode_bytes_per_token(spec: ModelSpec, manifest: Manifest) -> int:
    """Weight bytes one decode step reads at batch 1: every language tensor except the embedding table (one row is
    read) and the routed experts a token is not sent to; routed experts counted at their stored size."""
    dense = expert = 0
    for t in manifest.tensors:
        if t.role.startswith("passthrough.") or t.role == "embed":
            continue
        if t.expert is not None:
            expert += t.nbytes
        else:
            dense += t.nbytes
    share = spec.moe.experts_per_token / spec.moe.num_experts if spec.moe else 0.0
    return dense + round(expert * share) + spec.hidden_size * 2
