"""weight_table.py spells its layer groups as ranges: the groups it yields once imported are the weight map's,
layer for layer, for both shipped specs at full size and every target; a repeating layout takes as many ranges as its
period, not one line per layer."""

from __future__ import annotations

import pytest
from dayone.adapters.targets import TARGETS, common, generator
from dayone.adapters.weightmap import TARGET_LAYOUT, build_weight_map
from dayone.spec.registry import load_spec
from generate_fixtures import load
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize("name", ["kimi-k3", "kimi-linear-48b-a3b"])
@pytest.mark.parametrize("target", TARGETS)
def test_generated_groups_are_the_weight_maps(name, target, tmp_path):
    spec = load_spec(name)
    files = generator(target)(spec)
    common.write_tree(tmp_path, files)
    package = common.package_name(spec, target)
    table = load(tmp_path, f"{package}.weight_table")
    mxfp4 = "packed" if target in ("sglang", "vllm") else "dequantize"
    expected = build_weight_map(spec, TARGET_LAYOUT[target], mxfp4).LAYERS
    assert table.LAYERS == expected
    assert all(type(v) is tuple for v in table.LAYERS.values())
    text = files[f"{package}/weight_table.py"]
    group_lines = text[text.index("LAYERS = {") : text.index("NUM_EXPERTS")].count("\n")
    assert group_lines == len(expected) + 2, f"{group_lines} lines for {len(expected)} groups"


def test_k3_groups_take_as_many_ranges_as_the_layout_repeats():
    kinds = ["kda", "kda", "kda", "mla"] * 23 + ["mla"]
    kda = [i for i, kind in enumerate(kinds) if kind == "kda"]
    mla = [i for i, kind in enumerate(kinds) if kind == "mla"]
    assert common.layer_ranges(kda) == [range(0, 89, 4), range(1, 90, 4), range(2, 91, 4)]
    assert common.layer_ranges(mla) == [range(3, 92, 4), range(92, 93)]
    assert common.layer_ranges(range(1, 93)) == [range(1, 93)]
    assert common.ranges_expression(range(93)) == "layers(range(93))"
    assert common.ranges_expression([92]) == "layers(range(92, 93))"


@given(st.sets(st.integers(0, 200), max_size=60))
def test_ranges_cover_each_layer_once(indices):
    ranges = common.layer_ranges(indices)
    covered = [i for r in ranges for i in r]
    assert sorted(covered) == sorted(indices)  # no layer missing, none twice
    consecutive_runs = sum(1 for i in indices if i - 1 not in indices)
    assert len(ranges) <= consecutive_runs  # never worse than one range per run of consecutive layers
