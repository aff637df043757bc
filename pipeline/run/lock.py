"""One `integrate run` at a time per OUT: two runs would share OUT/stages/.NAME.partial and delete each other's work.

The lock is an advisory lock (flock) on OUT/.lock, held for the whole run. The kernel drops it when its holder
exits, however it exits (kill -9 included), so a lock left by a killed run is recovered by the next run without any
guess about pids; the file itself only says who holds it, for the message a second run prints.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dayone.core.errors import InputError

LOCK_FILE = ".lock"


@contextmanager
def hold(out: Path) -> Iterator[None]:
    """Hold OUT's lock, or raise InputError (exit 2) naming the run that holds it."""
    path = Path(out) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{out}: in use by {_holder(path)}; wait for it to finish or choose another -o") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": datetime.now(UTC).isoformat()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text())
        return f"integrate run (pid {info['pid']} on {info['host']}, since {info['since'][:19]} UTC)"
    except (OSError, ValueError, KeyError, TypeError):
        return "another integrate run"
