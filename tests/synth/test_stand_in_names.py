"""A stand-in of a spec with the longest name the schema allows is still a valid spec: its name is cut, not refused
(the Megatron checks of `generate --check` build a tiny stand-in of every spec they judge)."""

from __future__ import annotations

import re

import pytest
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import SPEC_NAME_PATTERN, ModelSpec
from dayone.synth import scaled_spec
from dayone.synth.faithful import faithful_spec

LONGEST = "k3." + "x" * 58 + "-v2"  # 64 characters


@pytest.mark.parametrize("scale", ["tiny", "small", "faithful"])
def test_stand_in_of_the_longest_name_is_valid(scale):
    spec = ModelSpec.model_validate({**spec_to_dict(load_spec("kimi-linear-48b-a3b")), "name": LONGEST})
    assert len(spec.name) == 64
    stand_in = faithful_spec(spec) if scale == "faithful" else scaled_spec(spec, scale)
    assert re.match(SPEC_NAME_PATTERN, stand_in.name) and len(stand_in.name) <= 64
    assert stand_in.name.startswith("k3.xxx") and stand_in.name.endswith(f"-{scale}")


def test_short_names_keep_their_whole_name():
    assert scaled_spec(load_spec("kimi-k3"), "tiny").name == "kimi-k3-tiny"


def test_the_commands_offer_every_scale():
    """`synth --scale` and `run --scale` keep their own copy of the scale names (importing dayone.synth would load
    torch for --help); the copies are the library's."""
    from dayone.commands import run_cmd, synth_cmd
    from dayone.synth import SCALE_NAMES

    assert synth_cmd.SCALE_NAMES == SCALE_NAMES and run_cmd.SCALE_NAMES == SCALE_NAMES
