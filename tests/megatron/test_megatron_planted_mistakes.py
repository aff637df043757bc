"""Mistakes the Megatron checks must catch, each failing with a message naming it: a weight-map entry pointing at a
parameter megatron-core's model does not have, and a layer kind of the spec's layout with no layer spec."""

from __future__ import annotations

from test_megatron_model import run_verify


def test_mapping_to_a_parameter_the_model_lacks_is_named():
    code, report, err = run_verify("kimi-k3", "--layers", "2", "--plant", "mapping")
    assert code == 1, err
    failures = report["failures"]
    assert (
        "rank 0: the weight map maps decoder.layers.0.self_attention.b_proj.weight, which the Megatron model does "
        "not have" in failures
    )
    unmapped = (
        "rank 0: decoder.layers.0.self_attention.beta_proj.weight is a tensor of the Megatron model the weight map"
    )
    assert f"{unmapped} does not map" in failures


def test_layer_kind_without_a_layer_spec_is_named():
    code, report, err = run_verify("kimi-k3", "--layers", "2", "--plant", "layer-kind")
    assert code == 1, err
    assert report["failures"] == ["layer 0: no Megatron layer spec for layer kind 'kda'"]
