"""A mistake planted in the weight map's canonical table (the one path from a checkpoint to dayone's model) fails
`validate`: a rename as one line naming the tensor, a swap of two same-shaped tensors as a numerics failure against
an independent reference (transformers' kimi_linear). Without an independent reference (K3: the reference tier
against the fast tier) both tiers load through the same table, so only the first kind can show there."""

from __future__ import annotations

import pytest
from dayone.adapters.weightmap import layouts
from dayone.core.errors import InputError
from dayone.validate import Options
from model_fixtures import write_kimi_linear
from validate_fixtures import validated

TOKENS = "5,9,2,77,31,8,60,4"


@pytest.fixture(scope="module")
def kimi_linear(tmp_path_factory):
    path = tmp_path_factory.mktemp("planted") / "kimi-linear"
    write_kimi_linear(path, seed=3)
    return path


def _validate(path, candidate):
    return validated(path, Options(reference="transformers", candidate=candidate, tokens=TOKENS, reload_check=False))


def test_unplanted_table_passes(kimi_linear):
    """The control: the same checkpoint and options pass with the table as shipped."""
    assert _validate(kimi_linear, "reference")["status"] == "pass"


@pytest.mark.parametrize("candidate", ["reference", "fast"])
def test_swapped_rule_fails_validate_at_the_first_kda_layer(kimi_linear, candidate, monkeypatch):
    """q_proj and k_proj have the same shape: the table loads each into the other's buffer. The model builds and
    loads; transformers, which read the checkpoint itself, shows the first KDA layer's attention output is wrong."""
    monkeypatch.setitem(layouts.CANONICAL_LAYER, "kda.q_proj", "self_attn.k_proj")
    monkeypatch.setitem(layouts.CANONICAL_LAYER, "kda.k_proj", "self_attn.q_proj")
    report = _validate(kimi_linear, candidate)
    first = report["details"]["first_failure"]
    assert report["status"] == "fail"
    assert (first["layer"], first["capture"]) == (0, "attn_out"), first


def test_renamed_rule_is_one_line_naming_the_tensor(kimi_linear, monkeypatch):
    monkeypatch.setitem(layouts.CANONICAL_LAYER, "kda.dt_bias", "self_attn.dt_bias_typo")
    with pytest.raises(InputError, match=r"^layers\.0\.self_attn\.dt_bias_typo: a parameter of the canonical weight"):
        _validate(kimi_linear, "reference")
