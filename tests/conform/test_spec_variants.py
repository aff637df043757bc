"""Every spec field is honoured by the vLLM target or refused by generate with one line naming the field, its value
and the target. A matrix of variants of the tiny K3 through `generate`; the honoured ones together through vLLM
itself (one probe run at world size 1)."""

from __future__ import annotations

import pytest
from conform_fixtures import NEW_MODEL_TYPE, SHORT_YARN_MLA, YARN_ROPE, prepare, tiny
from dayone.adapters.targets import vllm
from dayone.conform.driver import conform_target
from dayone.core.errors import InputError
from dayone.spec.schema import ModelSpec
from model_fixtures import with_updates


def variant(updates: dict) -> ModelSpec:
    return with_updates(tiny("kimi-k3"), updates)


def model_source(spec: ModelSpec) -> str:
    return next(text for path, text in vllm.files(spec).items() if path.endswith("/model.py"))


# variant -> (spec updates, text the generated model.py has, text it must not have)
HONOURED = {
    "softmax router": (
        {"moe": {"router": {"activation": "softmax"}}},
        'scoring_func="softmax"',
        'scoring_func="sigmoid"',
    ),
    "group-limited router": (
        {"moe": {"router": {"num_groups": 2, "topk_groups": 1}}},
        "use_grouped_topk=True,\n            num_expert_group=2,\n            topk_group=1,",
        None,
    ),
    "no correction bias": ({"moe": {"router": {"correction_bias": False}}}, "class Router", "e_score_correction_bias"),
    "gate bound": ({"kda": {"gate": {"lower_bound": -3.0}}}, '"gate_lower_bound": -3.0', None),
    "no q LoRA": ({"mla": {"q_lora_rank": None}}, "self.q_proj = ColumnParallelLinear(", "q_a_layernorm"),
    "no output gate": ({"mla": {"output_gate": False}}, "class LatentAttention", "self.g_proj = ColumnParallelLinear"),
    "dense prefix of 2": ({"layout": {"ffn": "2 x [dense] + 2 x [moe]"}}, '"dense": layers(range(2))', None),
    # DeepSeek-V3's YaRN rope (mscale != mscale_all_dim: the cos/sin amplitude too), 32768 x 32 positions cached
    "RoPE MLA": (
        {"mla": {"nope": False, "rope": YARN_ROPE}},
        '"rope_type": "deepseek_yarn"',
        "NoPE: nothing is rotated",
    ),
}
REFUSED = {
    "YaRN positions past its cache": (
        SHORT_YARN_MLA,
        "mla.rope.scaling: original_max_position_embeddings x factor = 32 (positions) is not supported by target vllm",
    ),
    "gate bound below vLLM's range": (
        {"kda": {"gate": {"lower_bound": -8.0}}},
        "kda.gate.lower_bound = -8.0 is not supported by target vllm",
    ),
    "gate rank other than head_dim": (
        {"kda": {"gate": {"rank": 32}}},
        "kda.gate.rank = 32 is not supported by target vllm",
    ),
}


@pytest.mark.parametrize("name", HONOURED)
def test_honoured_fields_show_in_the_generated_model(name):
    updates, present, absent = HONOURED[name]
    files = vllm.files(variant(updates))
    text = (
        next(t for p, t in files.items() if p.endswith("/model.py"))
        + files[next(p for p in files if p.endswith("weight_table.py"))]
    )
    assert present in text
    assert absent is None or absent not in text


@pytest.mark.parametrize("name", REFUSED)
def test_unsupported_fields_are_refused_in_one_line(name):
    updates, message = REFUSED[name]
    with pytest.raises(InputError) as caught:
        vllm.files(variant(updates))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_honoured_variants_together_conform_in_vllm(tmp_path):
    combined: dict = {}
    for updates, _, _ in HONOURED.values():
        for key, value in updates.items():
            combined.setdefault(key, {})
            for k, v in value.items():
                if isinstance(v, dict):
                    combined[key].setdefault(k, {}).update(v)
                else:
                    combined[key][k] = v
    spec = variant(combined)
    checkpoint, adapter = prepare(tmp_path, spec)
    (run,) = conform_target("vllm", adapter, checkpoint, spec, (1,), forward_dtypes=("float32",)).runs
    for level, entry in run.levels.items():  # forward too: the CPU paths honour every field (routing.py's groups)
        assert entry.status == "pass", f"{level}: {entry.detail}"


def test_a_new_model_type_registers_its_family_config():
    init = next(t for p, t in vllm.files(variant(NEW_MODEL_TYPE)).items() if p.endswith("/__init__.py"))
    assert 'MODEL_TYPE = "kimi_k4x"' in init and 'FAMILY_MODEL_TYPE = "kimi_k3"' in init
    assert 'FAMILY_ARCHITECTURE = "KimiK3ForConditionalGeneration"' in init
    shipped = next(t for p, t in vllm.files(tiny("kimi-k3")).items() if p.endswith("/__init__.py"))
    assert "_register_family" not in shipped  # vLLM knows kimi_k3 itself


def test_a_new_model_type_goes_through_every_level_in_vllm(tmp_path):
    """Without the registration vLLM refuses config.json's unknown model_type at "accepted"."""
    spec = variant(NEW_MODEL_TYPE)
    checkpoint, adapter = prepare(tmp_path, spec)
    (run,) = conform_target("vllm", adapter, checkpoint, spec, (1,), forward_dtypes=("float32",)).runs
    for level, entry in run.levels.items():
        assert entry.status == "pass", f"{level}: {entry.detail}"
    assert run.facts["architecture"] == "KimiK4xForConditionalGeneration"
