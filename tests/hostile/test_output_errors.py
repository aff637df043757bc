"""Issue 25 item 5: an output under a regular file (ENOTDIR), on a read-only filesystem (EROFS) or on a full one
(ENOSPC) is one line naming the path and the OS's reason, exit 2, across the writing commands (it was 29-55 lines of
traceback in 32 of 33 cases); an -o that exists and is not a regular file or folder (a device node) is refused, and
the node is left as it was (the write-then-rename swapped it for a regular file).

The read-only and full filesystems are real: tmpfs mounts, which need root. Where mounting is not allowed those
cases are skipped, with that reason; the ENOTDIR and device cases need no mount (the device one needs root for
mknod, else it uses a FIFO, which the same check refuses)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runner import integrate
from click.testing import CliRunner
from dayone.cli import cli
from tiny_checkpoint import tiny_kimi_linear


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_kimi_linear(tmp_path_factory, "outputs", layers=2)


@pytest.fixture(scope="module")
def inputs(tiny, tmp_path_factory) -> dict[str, Path]:
    """What package and dashboard read: generated adapters, and an `inspect --json` file."""
    folder = tmp_path_factory.mktemp("inputs")
    generated = folder / "generated"
    args = ["generate", "kimi-linear-48b-a3b", "--target", "sglang", "-o", str(generated)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    inspected = CliRunner().invoke(cli, ["inspect", str(tiny), "--json"])
    assert inspected.exit_code == 0
    (folder / "inspect.json").write_text(inspected.stdout)
    return {"generated": generated, "inspect": folder / "inspect.json"}


def _commands(tiny: Path, inputs: dict[str, Path]) -> dict[str, list[str]]:
    """Each writing command, its output named by {out}."""
    return {
        "compile": ["compile", "kimi-linear-48b-a3b", "--arch", "sm_90", "-o", "{out}"],
        "package": ["package", str(inputs["generated"]), "-o", "{out}"],
        "dashboard": ["dashboard", str(inputs["inspect"]), "-o", "{out}"],
        "synth": ["synth", "kimi-linear-48b-a3b", "--scale", "tiny", "--layers", "2", "-o", "{out}"],
        "spec-derive": ["spec", "derive", str(tiny), "-o", "{out}"],
        "spec-schema": ["spec", "schema", "-o", "{out}"],
        "golden": ["golden", str(tiny), "--tokens", "1,2", "--device", "cpu", "-o", "{out}"],
        "generate": ["generate", "kimi-linear-48b-a3b", "--target", "sglang", "-o", "{out}"],
        "prune": ["prune", str(tiny), "--layers", "0", "-o", "{out}"],
        "convert": ["convert", "mxfp4-to-bf16", str(tiny), "-o", "{out}"],
        "run": ["run", "--demo", "--skip", "conform", "-o", "{out}"],
    }


@dataclass
class _Ran:
    exit_code: int
    output: str
    stderr: str
    exception: BaseException | None


PROGRESS = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ ")


def _invoke(args: list[str], out: Path):
    args = [a.replace("{out}", str(out)) for a in args]
    if args[0] == "compile":  # a process of its own: this session interprets Triton, which compile refuses
        proc = integrate(*args)
        result = _Ran(proc.code, proc.out + proc.err, proc.err, SystemExit(proc.code))
    else:
        result = CliRunner().invoke(cli, args)
    # Off a terminal a long command says each step as it starts (a timestamped line: dayone.present.progress_line);
    # what went wrong is the one line after them.
    lines = [line for line in result.stderr.splitlines() if line.strip() and not PROGRESS.match(line)]
    return result, lines


def _assert_one_line(result, lines, *fragments):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    """A full tmpfs and a read-only one; skipped where this process may not mount."""
    root = tmp_path_factory.mktemp("mounts")
    full, readonly = root / "full", root / "readonly"
    full.mkdir()
    readonly.mkdir()
    mounted = []
    try:
        for folder, options in ((full, "size=64k"), (readonly, "ro,size=64k")):
            proc = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, check=False
            )
            if proc.returncode != 0:
                pytest.skip(
                    f"cannot mount a tmpfs here ({proc.stderr.decode().strip() or proc.returncode}): needs root"
                )
            mounted.append(folder)
        fd = os.open(full / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield {"full": (full, "No space left on device"), "readonly": (readonly, "Read-only file system")}
    finally:
        for folder in mounted:
            subprocess.run(["umount", str(folder)], check=False)


COMMANDS = [
    "synth", "spec-derive", "spec-schema", "golden", "generate", "prune", "convert", "run", "compile", "package",
    "dashboard",
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_under_a_regular_file(tiny, inputs, tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "out"
    result, lines = _invoke(_commands(tiny, inputs)[command], out)
    _assert_one_line(result, lines, str(blocker))
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("disk", ["full", "readonly"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_or_read_only_disk(tiny, inputs, mounts, command, disk):
    folder, reason = mounts[disk]
    out = folder / f"out-{command}"
    result, lines = _invoke(_commands(tiny, inputs)[command], out)
    # The path named is the output or a file being written under it (package names its staging folder).
    _assert_one_line(result, lines, str(folder), reason)
    # Nothing half-written is left but the (empty) folders the command made on its way, and run's (empty) lock.
    assert not any(p.is_file() and p.name not in ("filler", ".lock") for p in folder.rglob("*"))


FILE_OUTPUTS = ("spec-schema", "spec-derive", "golden")  # the others write a folder: "not a folder" says it


def _special(path: Path) -> str:
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # a copy of /dev/full
        return "character device"
    except PermissionError:
        os.mkfifo(path)
        return "FIFO"


@pytest.mark.parametrize("command", ["spec-schema", "spec-derive", "golden", "synth", "generate", "prune"])
def test_an_output_that_is_a_device_node_is_refused_and_kept(tiny, inputs, tmp_path, command):
    node = tmp_path / "node"
    kind = _special(node)
    result, lines = _invoke(_commands(tiny, inputs)[command], node)
    _assert_one_line(result, lines, str(node))
    if command in FILE_OUTPUTS:
        assert kind in lines[0], lines[0]
    mode = os.lstat(node).st_mode
    assert stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def test_run_stays_resumable_after_a_full_disk(tiny, inputs, mounts, tmp_path):
    # The full disk stops `run` in one line; the same OUT with room again runs on (the lock and leftovers cleared).
    folder, _ = mounts["full"]
    out = folder / "run-out"
    result, lines = _invoke(_commands(tiny, inputs)["run"], out)
    assert result.exit_code == 2 and len(lines) == 1
    moved = tmp_path / "run-out"
    if out.exists():
        shutil.copytree(out, moved, symlinks=True)
        shutil.rmtree(out)
    args = ["run", "--demo", "--skip", "conform", "--skip", "compile", "--skip", "validate", "-o", str(moved)]
    again = CliRunner().invoke(cli, args)
    assert again.exit_code in (0, 1) and isinstance(again.exception, SystemExit | None), again.output
    assert (moved / "report.json").is_file()
