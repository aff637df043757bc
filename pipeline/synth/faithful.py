"""The shape-faithful stand-in of a spec: every per-head and per-expert width of the release, fewer of everything else.

`tiny` and `small` (dayone.synth.scale) replace heads, head dims, gate ranks and expert counts, so a run on them
exercises the model code and its kernels at widths the release never has (2 x 16 heads, 8 experts top-2). This
scale keeps every width, rank, group count and ratio a kernel or a weight loader is specialised on, and shrinks only
what changes no kernel's shape class:

kept exactly
    KDA heads, head dim, conv width, gate kinds and ranks (A_log stored as the release stores it); MLA heads, q / kv
    LoRA ranks, nope / rope / v head dims, output gate; experts_per_token, router groups and top-k groups, routed
    expert intermediate size, latent size and norm, shared experts and their width; activation, residual kind and
    block size, quantization (MXFP4 group), the layout pattern's period and its dense prefix.
layers
    the shortest prefix of the release's layer table that holds every (attention, ffn) pairing the table has, the
    whole dense prefix and at least one layer after it, in whole periods of the attention pattern (K3: 4 layers of
    `23 x [kda kda kda mla] + [mla]`, so 3:1 KDA:MLA and one dense layer first).
experts
    the routing minimum: the fewest whole groups of experts such that the top-k groups can hold experts_per_token
    experts and the router still chooses (more experts than it picks). K3: 17 of 896 with top-16.
vocabulary
    256 ids, the special ids moved to its end (no kernel sees the vocabulary; lm_head is a runtime-sized GEMM).
hidden size, dense intermediate size
    Kept in shape class rather than in value. Their shape class is what kernels and GEMMs specialise on: whether the
    row is a power of two (the attention-residual and MoE-combine kernels pad a row to the next power of two and mask
    the rest; 7168 is masked, 4096 is not), and how many tile multiples divide it (MXFP4 reads K in 128-element
    tiles, GEMM libraries in 64 / 128). So the odd factor is kept and only powers of two above 128 are dropped:
    7168 = 7 x 2^10 -> 896, 2304 = 9 x 2^8 -> 1152, 33792 = 33 x 2^10 -> 4224, 4096 -> 128. The hidden size
    then takes back as few of its dropped powers of two as make hidden_size // num_attention_heads even (as the
    release's is, or it never was): transformers takes that quotient as the rotary width and refuses an odd one
    ("RoPE requires an even rotary dimension", inside vLLM's config loading) even where the attention is NoPE.
    K3: 7168 / 96 = 74, but 896 // 96 = 9, so 1792 (18). Keeping the value is not feasible on a CI CPU: a K3 KDA
    layer at hidden 7168 is 440 M parameters (every projection reads the hidden state), against 110 M at 1792. The
    compile stage of `integrate run` builds the kernels at the named spec's own dims anyway (dayone.run.stages), so
    the value itself is still compiled for.
vision passthrough
    scaled as `tiny` scales it: nothing runs it.

What is left is mostly the experts: K3's 17 routed experts are 3 x 3072 x 3584 each (560 M parameters per MoE layer,
MXFP4 on disk), a size for a workstation, not for CI; the drill (tests/drill) runs family members whose widths a
2-core runner takes in seconds.
"""

from __future__ import annotations

import math
import re

from dayone.spec.hf_config import attention_heads
from dayone.spec.layout import to_expression
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec
from dayone.synth.stand_in import scaled_vision, stand_in_name, token_ids_at_end

FAITHFUL_VOCAB = 256
SHAPE_CLASS_TILE = 128  # the largest power-of-two tile a shrunk width keeps as a divisor


def faithful_spec(spec: ModelSpec) -> ModelSpec:
    """The shape-faithful stand-in of `spec`, named `<name>-faithful` (see the module's docstring)."""
    data = spec_to_dict(spec)
    layers = faithful_layer_count(spec)
    data.update(name=stand_in_name(spec.name, "faithful"), num_layers=layers, hidden_size=faithful_hidden_size(spec))
    data.update(vocab_size=FAITHFUL_VOCAB, token_ids=token_ids_at_end(spec, FAITHFUL_VOCAB))
    data["layout"] = {
        "attention": to_expression(spec.attention_kinds[:layers]),
        "ffn": to_expression(spec.ffn_kinds[:layers]),
    }
    if spec.dense_intermediate_size is not None:
        data["dense_intermediate_size"] = shrink_in_class(spec.dense_intermediate_size)
    if spec.moe is not None:
        data["moe"]["num_experts"] = routing_minimum(spec)
    if spec.passthrough is not None and spec.passthrough.vision is not None:
        data["passthrough"]["vision"].update(scaled_vision())
    data["release"] = {"num_shards": spec.release.num_shards} if spec.release.num_shards else {}
    return ModelSpec.model_validate(data)


def shrink_in_class(width: int) -> int:
    """`width` with its odd factor kept and powers of two above SHAPE_CLASS_TILE dropped (7168 -> 896)."""
    twos = (width & -width).bit_length() - 1
    keep = min(twos, SHAPE_CLASS_TILE.bit_length() - 1)
    return (width >> twos) << keep


def faithful_hidden_size(spec: ModelSpec) -> int:
    """`shrink_in_class(spec.hidden_size)`, doubled (back towards the release's value, never past it) until
    hidden_size // num_attention_heads is even, the rotary width transformers checks: K3 7168 -> 896 -> 1792."""
    heads, hidden = attention_heads(spec), shrink_in_class(spec.hidden_size)
    while (hidden // heads) % 2 and hidden * 2 <= spec.hidden_size:
        hidden *= 2
    return hidden


def routing_minimum(spec: ModelSpec) -> int:
    """The fewest experts in whole router groups with which the top-k groups hold experts_per_token experts and
    the router still leaves some out."""
    assert spec.moe is not None
    k, router = spec.moe.experts_per_token, spec.moe.router
    per_group = math.ceil(k / router.topk_groups)
    while router.num_groups * per_group <= k and router.num_groups * per_group < spec.moe.num_experts:
        per_group += 1
    return min(router.num_groups * per_group, spec.moe.num_experts)


def faithful_layer_count(spec: ModelSpec) -> int:
    """The shortest prefix of the layer table in whole attention periods that holds every (attention, ffn) pairing,
    the dense prefix and a layer after it."""
    pairs = list(zip(spec.attention_kinds, spec.ffn_kinds, strict=True))
    first_seen = {pair: i for i, pair in reversed(list(enumerate(pairs)))}
    dense_prefix = next((i for i, kind in enumerate(spec.ffn_kinds) if kind != "dense"), 0)
    needed = max(max(first_seen.values()) + 1, dense_prefix + 1)
    period = attention_period(spec.attention_kinds)
    return min(math.ceil(needed / period) * period, spec.num_layers)


def attention_period(kinds: tuple[str, ...]) -> int:
    """The block length of the layout's dominant term (the one covering the most layers): 4 for
    `23 x [kda kda kda mla] + [mla]`, 1 for a table of one kind."""
    best, period = 0, 1
    for term in to_expression(kinds).split("+"):
        match = re.fullmatch(r"\s*(?:(\d+)\s*x\s*)?\[([^\]]*)\]\s*", term)
        assert match is not None, term  # to_expression writes only this grammar
        count, block = int(match.group(1) or 1), match.group(2).split()
        if count > 1 and count * len(block) > best:
            best, period = count * len(block), len(block)
    return period
