"""Issue 25 items 3 and 10: the files `integrate run` keeps in OUT under fixed names are never followed through a
link, a corrupt state file starts its stage again with one line, and what a killed run left is removed at the next
start. OUT/.lock as a symlink used to be followed (its target overwritten, a dangling one's target created outside
OUT); a planted run.json link gave a traceback, a corrupt run.json a JSONDecodeError.

The lock and state checks run on `dayone.run.lock.hold` and `integrate run` itself (in-process); each security test
fails when the defence is removed (the victim file's bytes change, or a file appears outside OUT)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from dayone.core.errors import InputError
from dayone.run import state
from dayone.run.lock import hold
from dayone.run.runner import PASS, Stage, StageResult, run_stages

SECRET_BYTES = b"a user's file: not dayone's to overwrite\n"


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_bytes(SECRET_BYTES)
    return path


def _out(tmp_path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    return out


@pytest.mark.parametrize("name", state.FIXED_NAMES)
def test_a_link_at_a_fixed_name_is_refused_and_its_target_untouched(tmp_path, victim, name):
    out = _out(tmp_path)
    (out / name).symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"), hold(out):
        pass
    assert victim.read_bytes() == SECRET_BYTES


def test_a_dangling_lock_link_creates_nothing_outside_out(tmp_path):
    out = _out(tmp_path)
    target = tmp_path / "outside-created"
    (out / ".lock").symlink_to(target)
    with pytest.raises(InputError), hold(out):
        pass
    assert not target.exists() and not target.is_symlink()


def test_the_lock_is_opened_without_following_even_past_the_name_check(tmp_path, victim, monkeypatch):
    # The link may appear between the check and the open: O_NOFOLLOW holds by itself.
    out = _out(tmp_path)
    monkeypatch.setattr("dayone.run.lock.check_out", lambda out: None)
    (out / ".lock").symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"), hold(out):
        pass
    assert victim.read_bytes() == SECRET_BYTES


def test_a_fifo_or_a_folder_as_the_lock_is_refused(tmp_path):
    out = _out(tmp_path)
    os.mkfifo(out / ".lock")  # an open for writing would block for ever without O_NONBLOCK
    with pytest.raises(InputError, match="not a regular file"), hold(out):
        pass


def test_the_lock_still_locks(tmp_path):
    out = _out(tmp_path)
    with hold(out):
        holder = json.loads((out / ".lock").read_text())
        assert holder["pid"] == os.getpid()


@pytest.mark.parametrize(
    "raw", [b"", b"{", b'{"created": 3}', b'{"created": "yesterday"}', b"[]", b"\xff\xfe"], ids=repr
)
def test_a_corrupt_run_json_is_started_again_with_one_line(tmp_path, capsys, raw):
    from dayone.commands.run_cmd import _created

    out = _out(tmp_path)
    (out / "run.json").write_bytes(raw)
    created = _created(out)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "run.json" in lines[0] and "starting" in lines[0], err
    assert json.loads((out / "run.json").read_text())["created"] == created.isoformat()


def test_a_run_json_link_is_one_line_exit_2(tmp_path, victim):
    out = _out(tmp_path)
    (out / "run.json").symlink_to(victim)
    result = CliRunner().invoke(cli, ["run", "--demo", "-o", str(out)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "run.json" in lines[0] and "symbolic link" in lines[0]
    assert victim.read_bytes() == SECRET_BYTES and not (out / "stages").exists()


def _stage(name: str, calls: list) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        calls.append(name)
        (workdir / "made").write_text(name)
        return StageResult(PASS, f"{name} done")

    run.__module__ = "dayone.run.runner"  # a stage's key digests its defining module
    return Stage(name, dict, run)


@pytest.mark.parametrize("record", ["{", "[]", '{"key": 1}', None], ids=["cut", "list", "fields", "link"])
def test_a_corrupt_or_linked_stage_record_runs_the_stage_again(tmp_path, victim, record):
    out = _out(tmp_path)
    calls: list[str] = []
    run_stages([_stage("a", calls)], out, "test")
    stage_file = out / "stages" / "a" / "stage.json"
    stage_file.unlink()
    if record is None:
        stage_file.symlink_to(victim)
    else:
        stage_file.write_text(record)
    results = run_stages([_stage("a", calls)], out, "test")
    assert calls == ["a", "a"] and results["a"].status == PASS and not results["a"].cached
    assert not stage_file.is_symlink() and json.loads(stage_file.read_text())["status"] == PASS
    assert victim.read_bytes() == SECRET_BYTES


def test_leftovers_of_a_killed_run_are_removed_at_the_next_start(tmp_path):
    out = _out(tmp_path)
    (out / "stages" / ".compile.partial" / "deep").mkdir(parents=True)
    (out / "logs").mkdir()
    leftovers = [out / ".report.json.tmp-4242", out / ".site.partial-4242", out / "logs" / ".x.json.tmp-7"]
    for path in leftovers:
        path.write_text("half")
    kept = [out / "report.json", out / "stages" / "spec", out / "notes.partial"]
    kept[0].write_text("{}")
    kept[1].mkdir()
    kept[2].write_text("the user's")
    removed = state.clean_leftovers(out)
    assert sorted(removed) == sorted([*leftovers, out / "stages" / ".compile.partial"])
    assert all(not p.exists() for p in removed) and all(p.exists() for p in kept)


def test_the_scratch_folder_takes_temporary_files_and_is_emptied_next_time(tmp_path):
    out = _out(tmp_path)
    (out / "tmp" / "dayone-megatron-left").mkdir(parents=True)  # a SIGKILLed run's
    with state.scratch_tempdir(out) as scratch:
        assert not (scratch / "dayone-megatron-left").exists()
        with tempfile.TemporaryDirectory(prefix="dayone-megatron-") as folder:
            assert Path(folder).parent == scratch
    assert tempfile.gettempdir() != str(scratch) and not scratch.exists()
