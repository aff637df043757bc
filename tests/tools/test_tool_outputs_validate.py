"""Converted and pruned checkpoints pass `integrate validate` (fast tier against the reference tier).

Needs real, well-scaled weights: `integrate synth kimi-k3 --scale tiny` (93 layers, MXFP4 experts).
"""

from __future__ import annotations

import pytest
from checkpoints import synthesize
from cli_runner import integrate


def ok(result) -> None:
    assert result.code == 0, result.out[-3000:] + result.err


@pytest.fixture(scope="module")
def tiny_k3(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "k3-tiny"
    return synthesize(path, "kimi-k3", "--scale", "tiny", "--shards", "3")


@pytest.fixture(scope="module")
def covered(tiny_k3, tmp_path_factory):
    """K3-tiny pruned to its covering layers (0, 1, 3, 12 with block size 3) and 4 experts."""
    path = tmp_path_factory.mktemp("prune") / "cover"
    ok(integrate("prune", tiny_k3, "-o", path, "--cover", "--experts", "4"))
    return path


def test_cover_prune_passes_validate(covered):
    ok(integrate("validate", covered))


def test_converted_prune_passes_validate(covered, tmp_path):
    ok(integrate("convert", "mxfp4-to-bf16", covered, "-o", tmp_path / "bf16"))
    ok(integrate("validate", tmp_path / "bf16"))
