"""What megatron-core cannot express of a spec, one line per field. Plain data checks, no torch: `integrate run`
asks before any stage runs (dayone.adapters.targets.refusals), and the Megatron model's config raises the first."""

from __future__ import annotations

from dayone.spec.schema import ModelSpec


def router_refusals(spec: ModelSpec) -> list[str]:
    """The router fields megatron-core 0.16.1's top-k (moe_utils.topk_routing_with_score_function) cannot express,
    one line each."""
    moe = spec.moe
    if moe is None:
        return []
    router, k, out = moe.router, moe.experts_per_token, []
    if router.activation == "sigmoid" and not router.renormalize and k > 1:
        # megatron-core renormalises the chosen sigmoid scores whenever top-k > 1
        out.append(
            f"spec {spec.name}: moe.router.renormalize false with sigmoid scores has no megatron-core form "
            "(it renormalises the chosen scores whenever top-k > 1)"
        )
    if router.num_groups > 1:
        # The spec ranks groups by the sum of their two best scores (DeepSeek-V3's noaux_tc); megatron-core's
        # group_limited_topk sums the best topk // group_topk, and ranks softmax groups on the raw logits unless
        # the softmax comes first (pre_softmax, i.e. renormalize false).
        if k // router.topk_groups != 2:
            out.append(
                f"spec {spec.name}: moe.router.topk_groups {router.topk_groups} with experts_per_token {k} has no "
                "megatron-core form (it ranks groups by their best experts_per_token / topk_groups scores, the "
                "spec by their best 2: experts_per_token // topk_groups must be 2)"
            )
        elif router.activation == "softmax" and router.renormalize:
            out.append(
                f"spec {spec.name}: moe.router.num_groups {router.num_groups} with renormalised softmax scores has "
                "no megatron-core form (it ranks the groups on the logits, the spec on the softmax scores)"
            )
    return out


def rope_refusals(spec: ModelSpec) -> list[str]:
    """The MLA rope megatron-core cannot express: it turns adjacent pairs only."""
    rope = spec.mla.rope if spec.mla is not None else None
    if rope is not None and not rope.interleave:
        return [f"spec {spec.name}: mla.rope.interleave false has no megatron-core form (its MLA turns adjacent pairs)"]
    return []


def megatron_refusals(spec: ModelSpec) -> list[str]:
    """Every spec field the Megatron model (Miles, Megatron-Bridge) cannot express, one line each."""
    return router_refusals(spec) + rope_refusals(spec)
