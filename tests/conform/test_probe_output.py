"""A probe's levels.json is read once, at the driver's edge, and validated there (another process wrote it): a file
that is not what the probes write makes the run fail with one line naming the field, never a KeyError further on.

The peer here is a stand-in: a `python` that installs nothing and whose probe writes the given levels.json, so the
driver, the command and its output are the real ones while no framework starts."""

from __future__ import annotations

import json
import stat

import pytest
from cli_runner import integrate
from conform_fixtures import tiny
from dayone.conform.results import LEVELS, MalformedProbeOutput, read_run
from dayone.synth.write import write_synthetic

FAKE_PEER = """#!/bin/bash
# A peer environment's python: pip installs nothing; the probe writes $FAKE_LEVELS as OUT/levels.json, alone or as the
# probe job of a session (SCRIPT --jobs JOBS.json); a forward writes nothing.
[ "$1" = "-m" ] && exit 0
if [ "$2" = "--jobs" ]; then
  exec python3 -c 'import json, os, sys
for job in json.load(open(sys.argv[1])):
    if job["kind"] == "probe":
        open(os.path.join(job["out"], "levels.json"), "w").write(os.environ["FAKE_LEVELS"])' "$3"
fi
while [ $# -gt 0 ]; do [ "$1" = "--out" ] && out=$2; shift; done
printf '%s' "$FAKE_LEVELS" > "$out/levels.json"
"""
ADAPTER = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "stand-in-adapter"
version = "0"
"""


def good_run() -> dict:
    levels = {name: {"status": "pass", "detail": "ok"} for name in LEVELS}
    return {"framework": "sglang", "version": "0.5.23", "world_size": 1, "levels": levels, "facts": {"a": None}}


def without(key: str) -> dict:
    run = good_run()
    del run[key]
    return run


def with_loaded_status(value) -> dict:
    run = good_run()
    run["levels"]["loaded"]["status"] = value
    return run


MALFORMED = {
    "missing field": (json.dumps(without("world_size")), "levels.json: world_size: Field required"),
    "wrong type": (json.dumps({**good_run(), "world_size": "1"}), "levels.json: world_size: Input should be a valid integer"),
    "unknown status": (json.dumps(with_loaded_status(3)), "levels.json: levels.loaded.status: Input should be 'pass', 'fail' or 'not run'"),
    "a level missing": (json.dumps({**good_run(), "levels": {"discovered": {"status": "pass", "detail": "ok"}}}),
                        "levels.json: levels: Value error, levels accepted, built, loaded, forward missing"),
    "not JSON": ("{", "levels.json: the document: Invalid JSON"),
}  # fmt: skip


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_levels_json_is_one_line_naming_the_field(tmp_path, case):
    text, line = MALFORMED[case]
    (tmp_path / "levels.json").write_text(text)
    with pytest.raises(MalformedProbeOutput) as raised:
        read_run(tmp_path / "levels.json")
    assert str(raised.value).startswith(line) and "\n" not in str(raised.value)


def test_a_well_formed_run_keeps_the_probes_key_order(tmp_path):
    """conform.json shows a run as its probe wrote it (SGLang's probe sorts the keys): same bytes as before typing."""
    run = good_run()
    written = json.dumps(run, indent=1, sort_keys=True)
    (tmp_path / "levels.json").write_text(written)
    typed = read_run(tmp_path / "levels.json")
    assert typed.levels["loaded"].status == "pass" and typed.world_size == 1
    assert json.dumps(typed.as_dict(), indent=1) == written
    typed.seconds = 2.5
    assert list(typed.as_dict()) == ["facts", "framework", "levels", "version", "world_size", "seconds"]


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """(peers folder with a stand-in sglang peer, an ADAPTER_DIR holding sglang/, a tiny checkpoint)."""
    root = tmp_path_factory.mktemp("stand-in")
    python = root / "peers" / "sglang" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PEER)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    adapter = root / "generated" / "sglang"
    adapter.mkdir(parents=True)
    (adapter / "pyproject.toml").write_text(ADAPTER)
    write_synthetic(tiny("kimi-linear-48b-a3b"), root / "checkpoint", seed=0, num_shards=1)
    return root / "peers", root / "generated", root / "checkpoint"


@pytest.mark.parametrize("case", ["missing field", "unknown status"])
def test_conform_reports_a_malformed_probe_output_as_a_failed_run(stand_in, case):
    peers, adapters, checkpoint = stand_in
    text, line = MALFORMED[case]
    env = {"DAYONE_PEERS": str(peers), "FAKE_LEVELS": text}
    result = integrate("conform", adapters, checkpoint, "--target", "sglang", "--world-size", "1", "--json", env=env)
    assert result.code == 1, result.err  # a failed run, not a crash
    assert "Traceback" not in result.err and "KeyError" not in result.err
    document = json.loads(result.out)
    (run,) = document["targets"][0]["runs"]
    assert not document["ok"] and run["world_size"] == 1
    discovered = run["levels"]["discovered"]
    assert discovered["status"] == "fail"
    assert discovered["detail"] == f"the sglang probe wrote a malformed {line}"
    assert [run["levels"][name]["status"] for name in LEVELS[1:]] == ["not run"] * 4


def test_conform_prints_a_line_per_level_and_world_size_off_a_terminal(stand_in):
    """Off a terminal (CI, a file) `integrate conform` says what it is doing as it goes: a timestamped line as the
    adapter is installed, one for each world size's probe as the engine process that runs them all starts, then one
    per level with its status, and why where it did not pass, in full (nothing cut)."""
    import re

    peers, adapters, checkpoint = stand_in
    run = good_run()
    reason = "the stand-in engine refused the model: " + "a long reason, " * 10 + "kept whole"
    run["levels"]["built"] = {"status": "fail", "detail": reason}
    run["levels"]["loaded"] = run["levels"]["forward"] = {"status": "not run", "detail": "an earlier level failed"}
    env = {"DAYONE_PEERS": str(peers), "FAKE_LEVELS": json.dumps(run), "COLUMNS": "80"}
    result = integrate("conform", adapters, checkpoint, "--target", "sglang", "--world-size", "1", "--world-size", "2",
                       env=env)  # fmt: skip
    assert result.code == 1, result.err
    lines = result.err.splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ conform: ", line) for line in lines), lines
    said = [line.split(" ", 2)[2] for line in lines]
    expected = ["conform: sglang: installing the adapter in its peer environment"]
    for world, dtypes in ((1, "float32, bfloat16"), (2, "float32")):  # one SGLang process for both world sizes
        expected.append(
            f"conform: sglang world size {world}: probing discovered, accepted, built, loaded, then the forward in "
            f"{dtypes}, in one sglang process for world sizes 1, 2"
        )
    for world in (1, 2):
        expected += [
            f"conform: sglang world size {world}: discovered pass",
            f"conform: sglang world size {world}: accepted pass",
            f"conform: sglang world size {world}: built fail: {reason}",
            f"conform: sglang world size {world}: loaded not run: an earlier level failed",
            f"conform: sglang world size {world}: forward not run: an earlier level failed",
        ]
    assert said == expected
