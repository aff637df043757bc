"""`integrate run`'s options as one value: each nonsensical combination is one line, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from dayone.core.errors import InputError
from dayone.core.vocabulary import ARCHS, TARGETS
from dayone.run.options import DEMO_SPEC, RunOptions

OUT = Path("/nonexistent/out")


def test_defaults_are_every_target_and_arch():
    options = RunOptions(OUT, demo=True)
    assert options.targets == TARGETS and options.archs == ARCHS and options.named_spec == DEMO_SPEC
    assert RunOptions(OUT, checkpoint="ck", stand_in_for="kimi-k3").named_spec == "kimi-k3"
    assert RunOptions(OUT, checkpoint="ck").named_spec is None


@pytest.mark.parametrize(
    "fields, message",
    [
        ({}, "give a CHECKPOINT or --demo"),
        ({"demo": True, "checkpoint": "ck"}, "give a CHECKPOINT or --demo"),
        ({"demo": True, "stand_in_for": "kimi-k3"}, "--stand-in-for names a CHECKPOINT's spec"),
        ({"checkpoint": "ck", "scale": "small"}, "--scale is --demo's"),
        ({"demo": True, "gpu": "h300"}, "--gpu h300: not a GPU the plan knows"),
    ],
)
def test_nonsense_is_refused_in_one_line(fields, message):
    with pytest.raises(InputError) as refused:
        RunOptions(OUT, **fields)
    assert message in str(refused.value) and "\n" not in str(refused.value)
