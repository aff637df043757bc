"""Every spec field is honoured by `generate --target sglang` or refused with one line naming field, value and
target. A matrix of variants of the tiny K3 goes through the generator; the honoured ones together go through
SGLang itself once (levels a-d at world size 1)."""

from __future__ import annotations

import dataclasses

import pytest
from dayone.adapters.targets import sglang
from dayone.errors import InputError
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec
from dayone.synth.scale import SCALES, scaled_spec
from dayone.synth.write import write_synthetic
from test_sglang_probe import generate, judge, probe

TINY = dataclasses.replace(SCALES["tiny"], expert_intermediate=64)


def variant(changes: dict) -> ModelSpec:
    """The tiny 5-layer K3 with nested fields replaced."""
    data = spec_to_dict(scaled_spec(load_spec("kimi-k3"), TINY, layers=5))

    def merge(d: dict, u: dict) -> None:
        for k, v in u.items():
            if isinstance(v, dict) and isinstance(d.get(k), dict):
                merge(d[k], v)
            else:
                d[k] = v

    merge(data, changes)
    return ModelSpec.model_validate(data)


ROUTER = ("moe", "router")
HONOURED = {
    "softmax router": ({"moe": {"router": {"activation": "softmax"}}}, "scores = logits.softmax(-1)"),
    "group-limited router": (
        {"moe": {"router": {"num_groups": 4, "topk_groups": 2}}},
        "grouped = choice.view(-1, 4, DIMS.experts // 4)",
    ),
    "no correction bias": ({"moe": {"router": {"correction_bias": False}}}, "choice = scores\n"),
    "gate bounds": ({"kda": {"gate": {"lower_bound": -3.0}}}, "lower_bound=-3.0"),
    "no q LoRA": ({"mla": {"q_lora_rank": None}}, "self.q_proj = ColumnParallelLinear("),
    "no output gate": ({"mla": {"output_gate": False}}, None),
    "dense prefix of two": ({"layout": {"ffn": "[dense dense] + 3 x [moe]"}}, 'if layer_id in LAYERS["moe"]:'),
}
REFUSED = {
    "RoPE MLA": ({"mla": {"nope": False}}, "mla.nope: false (MLA with RoPE) is not supported by target sglang"),
    "tied embeddings": ({"tie_word_embeddings": True}, "tie_word_embeddings: true is not supported by target sglang"),
    "topk groups past the groups": (
        {"moe": {"router": {"num_groups": 2, "topk_groups": 4}}},
        "moe.router.topk_groups: 4 exceeds num_groups 2 (target sglang)",
    ),
}


@pytest.mark.parametrize("case", sorted(HONOURED))
def test_honoured_variant_generates_code_for_the_field(case):
    changes, marker = HONOURED[case]
    model = next(text for path, text in sglang.files(variant(changes)).items() if path.endswith("/model.py"))
    compile(model, "model.py", "exec")
    if marker is not None:
        assert marker in model
    if case == "no correction bias":
        assert "e_score_correction_bias" not in model
    if case == "no output gate":
        assert "self.g_proj" not in model.split("class LatentAttention")[1].split("class Router")[0]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_variant_names_field_value_and_target(case):
    changes, line = REFUSED[case]
    with pytest.raises(InputError) as err:
        sglang.files(variant(changes))
    message = str(err.value)
    assert message.startswith(line) and "\n" not in message


def test_honoured_variants_together_load_in_sglang(tmp_path):
    """Softmax and group-limited routing without correction bias, no q LoRA, no MLA output gate, a safe gate
    bound of -3 and two dense layers: SGLang discovers, accepts, builds and loads it exactly."""
    spec = variant(
        {"moe": {"router": {"activation": "softmax", "num_groups": 4, "topk_groups": 2, "correction_bias": False}},
         "mla": {"q_lora_rank": None, "output_gate": False}, "kda": {"gate": {"lower_bound": -3.0}},
         "layout": {"ffn": "[dense dense] + 3 x [moe]"}}
    )  # fmt: skip
    write_synthetic(spec, tmp_path / "checkpoint", seed=7, num_shards=1)
    site = generate(spec, tmp_path)
    levels = probe(site, tmp_path / "checkpoint", 1, tmp_path / "out")["levels"]
    for level in ("discovered", "accepted", "built"):
        assert levels[level]["status"] == "pass", (level, levels[level])
    assert judge(spec, tmp_path / "checkpoint", tmp_path / "out", 1) == []
