"""`--reference auto` where transformers' own loading info refuses the checkpoint (a tensor its kimi_linear does not
read, a weight it finds no tensor for, one at another shape) takes the naive reference and says why, in the report's
reference_reason and one line on the console, as it does where transformers_gap or a missing model type decides;
`--reference transformers` on it stays bad input in one line.

The checkpoint is a tiny synthetic Kimi Linear (4 layers) whose weights are stored under another prefix (its config
carries the conventions block that says so): dayone reads it whole, transformers_gap finds nothing its model lacks,
and only loading it shows that transformers reads none of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_runner import assert_bad_input, integrate
from dayone.spec.registry import load_spec
from dayone.synth import scaled_spec, write_synthetic
from dayone.validate.references import transformers_gap
from validate_fixtures import ONE_THREAD

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

from model_fixtures import with_updates

PREFIX = "backbone."
UNREAD = "transformers' kimi_linear does not read these checkpoint tensors: backbone.embed_tokens.weight"


@pytest.fixture(scope="module")
def renamed(tmp_path_factory) -> Path:
    base = scaled_spec(load_spec("kimi-linear-48b-a3b"), "tiny", 4)
    spec = with_updates(
        base, {"conventions": {"extends": "kimi_linear", "prefix": PREFIX}, "checkpoint": {"prefix": PREFIX}}
    )
    assert transformers_gap(spec) is None  # nothing in the spec sends auto to naive: the loading info must
    root = tmp_path_factory.mktemp("renamed") / "kl-renamed"
    write_synthetic(spec, root, seed=0)
    return root


def test_auto_falls_back_to_naive_with_the_reason(renamed, tmp_path):
    report = tmp_path / "report.json"
    result = integrate("validate", renamed, "--tokens", "1,2,3,4", "--report", report, env=ONE_THREAD)
    assert result.code == 0, result.err
    details = json.loads(report.read_text())["details"]
    assert details["reference"] == "naive"
    reason = details["reference_reason"]
    assert reason.startswith(UNREAD) and reason.endswith(": judged against the naive reference"), reason
    assert reason in result.err.splitlines()  # and one line on stderr


def test_explicit_transformers_is_refused_in_one_line(renamed, tmp_path):
    report = tmp_path / "report.json"
    refused = integrate(
        "validate", renamed, "--tokens", "1,2,3,4", "--report", report, "--reference", "transformers", env=ONE_THREAD
    )
    assert_bad_input(refused, UNREAD, "use --reference naive")
    assert not report.exists()
