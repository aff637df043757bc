"""The files `integrate run` keeps in OUT under fixed names, read and checked without trusting what is there.

OUT is the user's folder, and anything may have been planted in it: a symbolic link at a fixed name would make the
run write through it to a file outside OUT (OUT/.lock pointing at a user's file was overwritten; a dangling one had
its target created). So every fixed name is refused when it is a link, and the state files are opened with
O_NOFOLLOW. A state file that cannot be parsed is not an error: the stage it records is built again, and the run
says so in one line. Temporary names a killed run left behind (.x.tmp-PID, .x.partial-PID, .x.old-PID, the scratch
folder) are removed at the next start, under the lock, when no other run can be writing them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dayone.core.errors import InputError

LOCK_FILE = ".lock"
RUN_FILE = "run.json"
# The run's temporary files (tempfile.tempdir while it runs): what a SIGKILL leaves there is removed next time.
SCRATCH = "tmp"
# Every name the run writes at OUT's top (cache: the compile stage's kernels): none of them may be a link.
FIXED_NAMES = (LOCK_FILE, RUN_FILE, "report.json", "stages", "logs", "reports", "site", "cache", SCRATCH)
STATE_MAX_BYTES = 1 << 20  # run.json and stage.json are a few hundred bytes
# What core.atomic and the runner leave when killed between creating and renaming.
_LEFTOVER = re.compile(r"\..+\.(tmp|partial|old)(-\d+)?")


def check_out(out: Path) -> None:
    """Refuse OUT when one of its fixed names is a symbolic link, naming it."""
    for name in FIXED_NAMES:
        path = out / name
        if path.is_symlink():
            raise InputError(
                f"{path}: is a symbolic link (to {os.readlink(path)}); integrate run does not follow links in OUT: "
                "remove it or choose another -o"
            )


def open_no_follow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open of a fixed-name file without following a link there, refusing anything but a regular file (a FIFO
    would block the open, a device would take the writes). O_NONBLOCK only for the open itself."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(f"{path}: is a symbolic link; integrate run does not follow links in OUT") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path}: is not a regular file; remove it or choose another -o")
    os.set_blocking(fd, True)
    return fd


def read_state(path: Path) -> tuple[dict | None, str | None]:
    """(the JSON object in the state file at path, None), (None, None) when there is none, or (None, why) when it
    cannot be used: the caller starts what it records again and says why in one line."""
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None, None
    except InputError as err:
        return None, str(err).removeprefix(f"{path}: ")
    except OSError as err:
        return None, f"cannot read: {err.strerror or err}"
    with os.fdopen(fd, "rb") as f:
        raw = f.read(STATE_MAX_BYTES + 1)
    if len(raw) > STATE_MAX_BYTES:
        return None, "larger than a state file can be"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None, "not valid JSON (a run killed while writing it, or edited)"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    return data, None


def clean_leftovers(out: Path) -> list[Path]:
    """Remove what killed runs left in OUT, OUT/stages and OUT/logs; return what was removed. Only under OUT's
    lock (OUT/tmp is scratch_tempdir's)."""
    removed = []
    for folder in (out, out / "stages", out / "logs"):
        if not folder.is_dir() or folder.is_symlink():
            continue
        for path in folder.iterdir():
            if _LEFTOVER.fullmatch(path.name):
                _remove(path)
                removed.append(path)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def scratch_tempdir(out: Path) -> Iterator[Path]:
    """OUT/tmp, emptied, as the process's temporary folder for the block (tempfile's, so the Megatron checks' spec
    folders go there): a run killed with SIGKILL leaves them in OUT, where the next start removes them, not in /tmp.
    Only under OUT's lock."""
    scratch = out / SCRATCH
    shutil.rmtree(scratch, ignore_errors=True)  # a killed run's (check_out refused a link here)
    scratch.mkdir()
    before = tempfile.tempdir
    tempfile.tempdir = str(scratch)
    try:
        yield scratch
    finally:
        tempfile.tempdir = before
        shutil.rmtree(scratch, ignore_errors=True)
