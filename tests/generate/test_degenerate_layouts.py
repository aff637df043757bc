"""Layouts at the edges of what the schema allows: KDA only, MLA only, every FFN dense, MoE without shared experts,
no dense prefix; each once with the unused part dropped from the spec and once with it left in (a layout edit
alone). Every one generates all four targets and passes `generate --check`'s checks (byte-compile, ruff, framework
API, weight table and model tree, protocols, determinism); none is refused. A spec no target can hold is refused
when it is read, in one line naming the field (the last test here).

The megatron-core runs of `--check` (a subprocess building the model per spec, some 20 s of CPU each) are not run
here: the peer path points nowhere, so they report "not run"; test_generate_command runs them on the shipped specs.
The longest spec name the schema allows (64 characters) goes through every target too: the lines that hold it stay
within ruff's line length."""

from __future__ import annotations

import pytest
import yaml
from cli_runner import assert_bad_input, integrate
from dayone.adapters.targets import TARGETS, common, generator
from dayone.checks.static import check_target
from dayone.spec.registry import spec_to_dict
from model_fixtures import tiny_k3_spec, with_updates

# name -> the fields changed from the 5-layer tiny K3 ([kda kda kda mla] + [mla], [dense] + 4 x [moe]).
LAYOUTS = {
    "kda-only": {"layout": {"attention": "5 x [kda]"}, "mla": None},
    "mla-only": {"layout": {"attention": "5 x [mla]"}, "kda": None},
    "all-dense": {"layout": {"ffn": "5 x [dense]"}, "moe": None, "quantization": None},
    "moe-no-shared": {"moe": {"num_shared_experts": 0, "shared_intermediate_size": 0}},
    "no-dense-prefix": {"layout": {"ffn": "5 x [moe]"}, "dense_intermediate_size": None},
    "kda-only-kept": {"layout": {"attention": "5 x [kda]"}},
    "mla-only-kept": {"layout": {"attention": "5 x [mla]"}},
    "all-dense-kept": {"layout": {"ffn": "5 x [dense]"}, "quantization": None},
    "x" * 64: {},  # the longest name the schema allows, on the unchanged layout
}


def _spec(name: str):
    return with_updates(tiny_k3_spec(5), {"name": name, **LAYOUTS[name]})


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout_generates_and_checks(name, tmp_path, monkeypatch):
    monkeypatch.setenv("DAYONE_MEGATRON_PEER", str(tmp_path / "no-megatron-peer"))
    spec = _spec(name)
    for target in TARGETS:
        files = generator(target)(spec)
        root = tmp_path / target
        common.write_tree(root, files)
        result = check_target(spec, target, root, files, lambda t=target: generator(t)(spec))
        problems = {kind: found for kind, found in result.problems.items() if found}
        assert result.ok, f"{target}: {problems}"
        if result.megatron is not None:
            assert {r["status"] for r in result.megatron.values()} == {"not run"}


def test_quantized_experts_without_a_moe_layer_are_refused_at_load(tmp_path):
    """All-dense with the moe and quantization sections left in: config.json would hold no routed expert, so synth
    and the Megatron round trip could not rebuild the spec; refused when the spec is read, in one line."""
    spec = with_updates(
        tiny_k3_spec(5), {"name": "all-dense-q", "layout": {"ffn": "5 x [dense]"}, "quantization": None}
    )
    data = spec_to_dict(spec)
    data["quantization"] = spec_to_dict(tiny_k3_spec(5))["quantization"]
    path = tmp_path / "all-dense-q.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = integrate("generate", path, "--target", "all", "-o", tmp_path / "out")
    assert_bad_input(result, "quantization: the layout has no moe layer")
    assert not (tmp_path / "out").exists()
