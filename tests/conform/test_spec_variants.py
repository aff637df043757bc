"""Every spec field is honoured by the vLLM target or refused by generate with one line naming the field, its value
and the target. A matrix of variants of the tiny K3 through `generate`; the honoured ones together through vLLM
itself at world size 1, each level and the fp32 forward (a run of the conform tests' vLLM batch, conftest.py)."""

from __future__ import annotations

import pytest
from conform_fixtures import HONOURED, NEW_MODEL_TYPE, SHORT_YARN_MLA, k3_variant, tiny
from dayone.adapters.targets import vllm
from dayone.core.errors import InputError

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
    files = vllm.files(k3_variant(updates))
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
        vllm.files(k3_variant(updates))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_honoured_variants_together_conform_in_vllm(vllm_batch):
    (run,) = vllm_batch["honoured-together"].report.runs
    for level, entry in run.levels.items():  # forward too: the CPU paths honour every field (routing.py's groups)
        assert entry.status == "pass", f"{level}: {entry.detail}"


def test_a_new_model_type_registers_its_family_config():
    init = next(t for p, t in vllm.files(k3_variant(NEW_MODEL_TYPE)).items() if p.endswith("/__init__.py"))
    assert 'MODEL_TYPE = "kimi_k4x"' in init and 'FAMILY_MODEL_TYPE = "kimi_k3"' in init
    assert 'FAMILY_ARCHITECTURE = "KimiK3ForConditionalGeneration"' in init
    shipped = next(t for p, t in vllm.files(tiny("kimi-k3")).items() if p.endswith("/__init__.py"))
    assert "_register_family" not in shipped  # vLLM knows kimi_k3 itself


def test_a_new_model_type_goes_through_every_level_in_vllm(vllm_batch):
    """Without the registration vLLM refuses config.json's unknown model_type at "accepted"."""
    (run,) = vllm_batch["new-model-type"].report.runs
    for level, entry in run.levels.items():
        assert entry.status == "pass", f"{level}: {entry.detail}"
    assert run.facts["architecture"] == "KimiK4xForConditionalGeneration"
