"""synth --scale faithful: every per-head and per-expert width of the release kept; layers, experts, vocabulary and
the hidden size's powers of two shrunk (dayone.synth.faithful)."""

from __future__ import annotations

import json

import pytest
from cli_runner import assert_bad_input, integrate
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from dayone.synth import scaled_spec
from dayone.synth.faithful import attention_period, faithful_layer_count, routing_minimum, shrink_in_class

ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def _variant(base: str, **updates) -> ModelSpec:
    data = spec_to_dict(load_spec(base))
    for key, value in updates.items():
        if isinstance(value, dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return ModelSpec.model_validate(data)


@pytest.mark.parametrize("name", ["kimi-k3", "kimi-linear-48b-a3b"])
def test_every_per_head_and_per_expert_width_kept(name):
    release = load_spec(name)
    faithful = scaled_spec(release, "faithful")
    assert faithful.kda == release.kda and faithful.mla == release.mla
    keep = {"num_experts"}
    assert faithful.moe.model_dump(exclude=keep) == release.moe.model_dump(exclude=keep)
    assert (faithful.activation, faithful.residual, faithful.quantization, faithful.checkpoint) == (
        release.activation, release.residual, release.quantization, release.checkpoint,
    )  # fmt: skip
    # 3:1 KDA:MLA with the dense first layer, in one period of the pattern
    assert faithful.attention_kinds == ("kda", "kda", "kda", "mla")
    assert faithful.ffn_kinds == ("dense", "moe", "moe", "moe")
    assert all(0 <= i < faithful.vocab_size for i in faithful.token_ids.model_dump(exclude_none=True).values())


def test_k3_numbers():
    k3 = scaled_spec(load_spec("kimi-k3"), "faithful")
    assert (k3.name, k3.num_layers, k3.hidden_size, k3.dense_intermediate_size) == ("kimi-k3-faithful", 4, 1792, 4224)
    assert (k3.moe.num_experts, k3.moe.experts_per_token, k3.kda.a_log_shape) == (17, 16, (128,))
    kl = scaled_spec(load_spec("kimi-linear-48b-a3b"), "faithful")
    assert (kl.hidden_size, kl.moe.num_experts, kl.kda.a_log_shape) == (1152, 9, (1, 1, 32, 1))


@pytest.mark.parametrize(
    ("width", "shrunk"), [(7168, 896), (2304, 1152), (33792, 4224), (4096, 128), (96, 96), (1536, 384), (640, 640)]
)
def test_hidden_keeps_its_shape_class(width, shrunk):
    """Odd factor kept, powers of two above 128 dropped: a masked row stays masked, a 128-tile multiple stays one."""
    assert shrink_in_class(width) == shrunk
    odd = lambda n: n // (n & -n)
    assert odd(shrunk) == odd(width) and (shrunk & (shrunk - 1) == 0) == (width & (width - 1) == 0)
    assert shrunk % 128 == 0 or shrunk == width


@pytest.mark.parametrize(
    ("hidden", "heads", "faithful"),
    [
        (7168, 96, 1792),  # K3: 896 // 96 = 9, odd; 1792 // 96 = 18
        (2304, 32, 1152),  # Kimi Linear: 1152 // 32 = 36, nothing taken back
        (7168, 64, 896),  # 896 // 64 = 14
        (3584, 96, 1792),  # 7 x 2^9: one power of two taken back of the two dropped
        (7168, 768, 1792),  # 896 // 768 = 1, 1792 // 768 = 2
        (1152, 128, 1152),  # the release's own 9 is odd: never wider than the release
    ],
)
def test_hidden_size_gives_transformers_an_even_rotary_width(hidden, heads, faithful):
    """transformers (inside vLLM's config loading) takes hidden_size // num_attention_heads as the rotary width and
    refuses an odd one, NoPE or not: the faithful hidden size takes back the fewest dropped powers of two for it."""
    mla = {**spec_to_dict(load_spec("kimi-k3"))["mla"], "num_heads": heads}
    spec = _variant("kimi-k3", hidden_size=hidden, mla=mla)
    found = scaled_spec(spec, "faithful")
    assert found.hidden_size == faithful
    assert hidden % found.hidden_size == 0 and found.hidden_size % shrink_in_class(hidden) == 0
    config = to_hf_config(found)
    text = config.get("text_config", config)
    assert text["hidden_size"] == faithful and text["num_attention_heads"] == heads
    even = (faithful // heads) % 2 == 0
    assert even or faithful == hidden
    assert faithful == shrink_in_class(hidden) or (faithful // 2 // heads) % 2 == 1  # no wider than needed


@pytest.mark.parametrize(
    ("k", "groups", "topk_groups", "experts"),
    [(16, 1, 1, 17), (8, 1, 1, 9), (4, 4, 2, 8), (8, 4, 4, 12), (8, 8, 4, 16), (6, 2, 1, 12)],
)
def test_routing_minimum(k, groups, topk_groups, experts):
    """Whole groups; the top-k groups hold k experts; the router leaves some out."""
    moe = spec_to_dict(load_spec("kimi-linear-48b-a3b"))["moe"]
    moe.update(num_experts=64, experts_per_token=k)
    moe["router"].update(num_groups=groups, topk_groups=topk_groups)
    spec = _variant("kimi-linear-48b-a3b", moe=moe)
    found = routing_minimum(spec)
    assert found == experts
    assert found % groups == 0 and found // groups * topk_groups >= k and found > k


@pytest.mark.parametrize(
    ("attention", "ffn", "layers", "period", "kept"),
    [
        ("23 x [kda kda kda mla] + [mla]", "[dense] + 92 x [moe]", 93, 4, 4),
        ("6 x [kda kda kda kda kda mla]", "[dense] + 35 x [moe]", 36, 6, 6),
        ("6 x [kda kda mla]", "3 x [dense] + 15 x [moe]", 18, 3, 6),  # MLA on a dense layer: the second period
        ("[kda kda kda mla]", "[dense moe moe moe]", 4, 1, 4),  # no repeated term: the shortest prefix
    ],
)
def test_layer_count(attention, ffn, layers, period, kept):
    spec = _variant("kimi-linear-48b-a3b", num_layers=layers, layout={"attention": attention, "ffn": ffn})
    assert attention_period(spec.attention_kinds) == period
    assert faithful_layer_count(spec) == kept
    pairs = set(zip(spec.attention_kinds, spec.ffn_kinds, strict=True))
    assert set(zip(spec.attention_kinds[:kept], spec.ffn_kinds[:kept], strict=True)) == pairs


def test_written_stand_in_derives_back(tmp_path):
    """synth --scale faithful writes a checkpoint whose config.json derives the faithful spec (release aside)."""
    small = _variant("kimi-linear-48b-a3b", name="kl-small", hidden_size=1024,
                     kda={"num_heads": 16, "head_dim": 64, "gate": {"kind": "plain", "rank": 64},
                          "output_gate": {"kind": "low_rank", "rank": 64}, "a_log_shape": [1, 1, 16, 1]},
                     mla={"num_heads": 16, "kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                          "v_head_dim": 64})  # fmt: skip
    spec_file = tmp_path / "kl-small.json"
    spec_file.write_text(json.dumps(spec_to_dict(small)))
    out = tmp_path / "kl-small-faithful"
    result = integrate("synth", spec_file, "--scale", "faithful", "--shards", "2", "-o", out, env=ONE_THREAD)
    assert result.code == 0, result.err
    expected = scaled_spec(small, "faithful")
    derived = derive_spec(json.loads((out / "config.json").read_text()), expected.name, num_shards=2)
    assert derived.model_dump(exclude={"release"}) == expected.model_dump(exclude={"release"})
    assert integrate("inspect", out, env=ONE_THREAD).code == 0


def test_faithful_chooses_its_layers():
    result = integrate("synth", "kimi-k3", "--scale", "faithful", "--layers", "3", "-o", "unused", env=ONE_THREAD)
    assert_bad_input(result, "--layers", "faithful")
