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

from dayone.core.atomic import naming
from dayone.core.errors import InputError
from dayone.run.state import LOCK_FILE, check_out, open_no_follow, read_state


@contextmanager
def hold(out: Path) -> Iterator[None]:
    """Hold OUT's lock, or raise InputError (exit 2) naming the run that holds it. OUT/.lock is opened without
    following a link (dayone.run.state): a planted link would have the holder written to the file it points at."""
    out = Path(out)
    check_out(out)
    path = out / LOCK_FILE
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{out}: in use by {_holder(path)}; wait for it to finish or choose another -o") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": datetime.now(UTC).isoformat()}
        with naming(path):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _holder(path: Path) -> str:
    info, _ = read_state(path)
    try:
        return f"integrate run (pid {int(info['pid'])} on {info['host']!r}, since {str(info['since'])[:19]} UTC)"
    except (ValueError, KeyError, TypeError):
        return "another integrate run"
