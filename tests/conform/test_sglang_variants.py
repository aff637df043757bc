"""Every spec field is honoured by `generate --target sglang` or refused with one line naming field, value and
target. A matrix of variants of the tiny K3 goes through the generator (cheap); the honoured ones together go
through SGLang itself once (levels a-d at world size 1, a job of the session's probe batch)."""

from __future__ import annotations

import pytest
from conform_fixtures import NEW_MODEL_TYPE, SHORT_YARN_MLA, YARN_ROPE
from dayone.adapters.targets import common, sglang
from dayone.conform.driver import conform_target
from dayone.core.errors import InputError
from dayone.synth.write import write_synthetic
from test_sglang_probe import COMBINED_VARIANT, PLAIN_ROPE, judge, sglang_batch, variant


@pytest.fixture(scope="session")
def probed(tmp_path_factory):
    return sglang_batch(tmp_path_factory)


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
    "YaRN rope": ({"mla": {"nope": False, "rope": YARN_ROPE}}, '"rope_type": "deepseek_yarn"'),
}
REFUSED = {
    "YaRN positions past its cache": (
        SHORT_YARN_MLA,
        "mla.rope.scaling: original_max_position_embeddings x factor = 32 (positions) is not supported by target sglang",
    ),
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


def test_honoured_variants_together_load_in_sglang(probed):
    """All honoured variants at once (COMBINED_VARIANT): SGLang discovers, accepts, builds and loads it exactly."""
    assert all(_covered())
    run = probed["variants"]
    levels = run.levels["levels"]
    for level in ("discovered", "accepted", "built"):
        assert levels[level]["status"] == "pass", (level, levels[level])
    assert judge(run.case.spec, run.case.checkpoint, run.out, 1) == []
    # the YaRN rope built by SGLang's own CPU rotary embedding (its CPU engine switched on for that package only)
    assert any("SGLANG_USE_CPU_ENGINE=1" in s for s in run.levels["facts"]["cpu_stand_ins"])


def test_unscaled_rope_is_not_run_on_the_cpu_with_sglangs_reason(probed):
    """SGLang's CPU rotary embedding asserts on an unscaled rope (get_rope_cpu): built and everything after it are
    "not run" with that reason in one line, never a failure of the adapter, never a pass."""
    assert PLAIN_ROPE["mla"]["rope"].get("scaling") is None
    levels = probed["plain-rope"].levels["levels"]
    for level in ("discovered", "accepted"):
        assert levels[level]["status"] == "pass", (level, levels[level])
    for level in ("built", "loaded", "forward"):
        assert levels[level]["status"] == "not run", (level, levels[level])
        assert "get_rope_cpu" in levels[level]["detail"] and "unscaled" in levels[level]["detail"]
        assert "\n" not in levels[level]["detail"]
    assert not (probed["plain-rope"].out / "rank0.safetensors").exists()


def _covered() -> list[bool]:
    """Each honoured variant's changes are part of the combined one run through SGLang."""

    def within(small: dict, big: dict) -> bool:
        return all(within(v, big.get(k, {})) if isinstance(v, dict) else big.get(k) == v for k, v in small.items())

    return [within(changes, COMBINED_VARIANT) for changes, _ in HONOURED.values()]


def test_a_new_model_type_registers_as_an_sglang_plugin():
    files = sglang.files(variant(NEW_MODEL_TYPE))
    init = next(text for path, text in files.items() if path.endswith("/__init__.py"))
    assert '[project.entry-points."sglang.srt.plugins"]' in files["pyproject.toml"]
    assert 'MODEL_TYPE = "kimi_k4x"' in init and 'FAMILY_MODEL_TYPE = "kimi_k3"' in init
    assert 'FAMILY_ARCHITECTURE = "KimiK3ForConditionalGeneration"' in init and '"KimiK4xConfig"' in init
    shipped = sglang.files(variant({}))
    assert "sglang.srt.plugins" not in shipped["pyproject.toml"]  # SGLang knows kimi_k3 itself


def test_a_new_model_type_goes_through_every_level_in_sglang(tmp_path):
    """Without the plugin SGLang's config parser refuses config.json's unknown model_type at "accepted", and its
    model config takes an unknown architecture for multi-head attention (no MLA cache)."""
    spec = variant(NEW_MODEL_TYPE)
    write_synthetic(spec, tmp_path / "checkpoint", seed=3, num_shards=1)
    common.write_tree(tmp_path / "gen", sglang.files(spec))
    report = conform_target(
        "sglang", tmp_path / "gen", tmp_path / "checkpoint", spec, (1,), forward_dtypes=("float32",)
    )
    (run,) = report.runs
    for level, entry in run.levels.items():
        assert entry.status == "pass", f"{level}: {entry.detail}"
    assert run.facts["use_mla"] and run.facts["kda"]
