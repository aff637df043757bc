"""Stages hand each other typed values in memory (dayone.run.outputs), and stage.json records them: a reused stage
hands on what a fresh one did, a record that cannot be trusted (a path leaving the stage's folder, a file gone,
wrong types) builds the stage again, and a reader's key follows what it was handed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dayone.run.outputs import StageOutput, UnusableOutput
from dayone.run.runner import FAIL, NOT_RUN, PASS, Stage, StageResult, run_stages


class Made(StageOutput):
    file: Path
    note: str = ""


class Read(StageOutput):
    seen: str  # what the reader found in the file it was handed


def _stages(calls: list, note: str = "", writer_status: str = PASS, reads: bool = False) -> list[Stage]:
    def write(workdir: Path, upstream: dict) -> StageResult:
        calls.append("write")
        (workdir / "made.txt").write_text("made")
        return StageResult(writer_status, "wrote", Made(file=workdir / "made.txt", note=note))

    def read(workdir: Path, upstream: dict) -> StageResult:
        calls.append("read")
        made = upstream["write"]
        seen = "nothing" if made is None else f"{made.file.read_text()} {made.note}".strip()
        return StageResult(PASS, seen, Read(seen=seen))

    for run in (write, read):
        run.__module__ = "dayone.run.runner"  # a stage's key digests its defining module, which must be dayone's
    after = {"reads": ("write",)} if reads else {"after": ("write",)}
    return [Stage("write", dict, write, output=Made), Stage("read", dict, read, output=Read, **after)]


def test_the_reader_gets_the_writers_value_in_the_writers_final_folder(tmp_path):
    calls: list[str] = []
    results = run_stages(_stages(calls), tmp_path, "0")
    made = results["write"].output
    assert made == Made(file=tmp_path / "stages" / "write" / "made.txt")  # not the .partial folder it was built in
    assert results["read"].summary == "made"
    record = json.loads((tmp_path / "stages" / "write" / "stage.json").read_text())
    assert record["output"] == {"file": "made.txt", "note": "", "reports": []}  # relative: the folder can move


def test_a_reused_stage_hands_on_the_value_a_fresh_one_did(tmp_path):
    calls: list[str] = []
    first = run_stages(_stages(calls), tmp_path, "0")
    again = run_stages(_stages(calls), tmp_path, "0")
    assert calls == ["write", "read"] and again["write"].cached and again["read"].cached
    assert again["write"].output == first["write"].output and again["read"].output == first["read"].output


@pytest.mark.parametrize(
    "record",
    [{"file": "../../outside.txt"}, {"file": "/etc/hostname"}, {"file": "gone.txt"}, {"file": 7}, None, ["x"]],
    ids=["leaves-the-folder", "absolute", "file-gone", "wrong-type", "missing", "not-an-object"],
)
def test_a_recorded_value_that_cannot_be_trusted_builds_the_stage_again(tmp_path, record):
    calls: list[str] = []
    run_stages(_stages(calls), tmp_path, "0")
    (tmp_path / "outside.txt").write_text("planted")
    state = tmp_path / "stages" / "write" / "stage.json"
    data = json.loads(state.read_text())
    data["output"] = record
    state.write_text(json.dumps(data))
    results = run_stages(_stages(calls), tmp_path, "0")
    assert calls == ["write", "read", "write"], calls  # the reader's inputs are the same again: reused
    assert not results["write"].cached and results["write"].output.file == tmp_path / "stages" / "write" / "made.txt"
    assert results["read"].summary == "made"


def test_what_a_stage_hands_on_is_part_of_its_readers_key(tmp_path):
    """The writer's value changed (not its files): the reader runs again and sees the change."""
    calls: list[str] = []
    # A failed writer runs each time with the same key; the reader reads it through `reads` (a failed stage's value).
    first = run_stages(_stages(calls, note="one", writer_status=FAIL, reads=True), tmp_path, "0")
    assert first["read"].summary == "made one"
    results = run_stages(_stages(calls, note="two", writer_status=FAIL, reads=True), tmp_path, "0")
    assert results["write"].key == first["write"].key
    assert results["read"].summary == "made two" and not results["read"].cached
    again = run_stages(_stages(calls, note="two", writer_status=FAIL, reads=True), tmp_path, "0")
    assert again["read"].cached and calls == ["write", "read", "write", "read", "write"]


def test_an_optional_read_of_a_skipped_stage_is_none_whatever_its_folder_holds(tmp_path):
    """`reads`: the value of a stage that made one, else None. A skipped stage's folder from an earlier run is not
    handed on (package once read a skipped conform's old reports this way)."""
    calls: list[str] = []
    run_stages(_stages(calls, reads=True), tmp_path, "0")
    results = run_stages(_stages(calls, reads=True), tmp_path, "0", skip=frozenset({"write"}))
    assert results["write"].status == NOT_RUN and results["write"].skipped
    assert results["read"].summary == "nothing" and not results["read"].cached


def test_a_stage_whose_value_names_a_file_it_did_not_make_fails_as_a_bug(tmp_path):
    def run(workdir: Path, upstream: dict) -> StageResult:
        return StageResult(PASS, "claims a file", Made(file=workdir / "never-written.txt"))

    run.__module__ = "dayone.run.runner"
    results = run_stages([Stage("write", dict, run, output=Made)], tmp_path, "0")
    assert results["write"].status == FAIL and "UnusableOutput" in results["write"].summary
    assert "never-written.txt" in results["write"].summary
    assert (tmp_path / "logs" / "write.traceback").is_file()


def test_load_refuses_a_link_out_of_the_folder(tmp_path):
    folder = tmp_path / "stage"
    folder.mkdir()
    (tmp_path / "secret").write_text("x")
    (folder / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(UnusableOutput, match="outside the stage's folder"):
        Made.load({"file": "link"}, folder)


def _every_run_stage() -> list[Stage]:
    from dayone.run import stages as S

    built = [getattr(S, f"{name}_stage")(None) for name in ("spec", "coverage", "plan", "generate", "conform",
                                                             "compile", "validate", "package")]  # fmt: skip
    return [*built, S.synth_stage(None, "tiny", 0), S.publish_stage(None, None)]


def test_every_stage_of_a_run_says_what_it_hands_on_and_names_no_module_by_hand():
    """Each stage declares its output type; its `code` holds only folders no import shows (`pkg.*`): the modules it
    runs are read off its function, never listed (a list goes stale when the function's imports change)."""
    for stage in _every_run_stage():
        assert stage.output is not None and issubclass(stage.output, StageOutput), stage.name
        assert all(entry.endswith(".*") for entry in stage.code), (stage.name, stage.code)
