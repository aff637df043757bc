"""Issue 25 item 10: SIGKILL of `integrate run` left the Megatron child process running and a temp folder behind.
Children run through dayone.core.child: a process group of their own that the kernel kills when dayone dies, killed
whole on a timeout; the temp folder half is in test_run_state_files.py (OUT/tmp, emptied at the next start).

Each test SIGKILLs a real parent process and watches for its child (and grandchild): they fail when the children
are started with plain subprocess.run, which leaves both running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dayone.core import child

# The child writes its pid, starts a grandchild (as torch's spawn does for the ranks), and sleeps.
SLEEPER = """
import os, subprocess, sys, time
from pathlib import Path
grandchild = subprocess.Popen([sys.executable, "-P", "-c", "import time; time.sleep(120)"])
Path(sys.argv[1]).write_text(f"{os.getpid()} {grandchild.pid}")
time.sleep(120)
"""
# The parent runs the child through dayone.core.child and waits (like `run` waiting on the Megatron check).
PARENT = """
import sys
from dayone.core import child
child.run([sys.executable, "-P", "-c", sys.argv[1], sys.argv[2]], timeout=float(sys.argv[3]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def _wait_for(path: Path, seconds: float = 30) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and path.read_text():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def _gone(pids: list[int], seconds: float = 10) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def reap():
    started: list[int] = []
    yield started
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkilled_parent_takes_its_child_along(tmp_path, reap):
    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-P", "-c", PARENT, SLEEPER, str(pids), "600"])
    reap.append(parent.pid)
    child_pid, grandchild_pid = _wait_for(pids)
    reap.extend([child_pid, grandchild_pid])
    assert _alive(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _gone([child_pid]), "the child outlived its SIGKILLed parent"


def test_a_timeout_kills_the_whole_group(tmp_path, reap):
    pids = tmp_path / "pids"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        child.run([sys.executable, "-P", "-c", SLEEPER, str(pids)], timeout=3)
    child_pid, grandchild_pid = _wait_for(pids, 1)
    reap.extend([child_pid, grandchild_pid])
    assert time.monotonic() - start < 15
    assert _gone([child_pid, grandchild_pid]), "a timeout left the child's own children running"


def test_it_runs_like_subprocess_run():
    proc = child.run(
        [sys.executable, "-P", "-c", "import sys; print('out'); sys.exit(3)"], capture_output=True, text=True
    )
    assert (proc.returncode, proc.stdout) == (3, "out\n")
