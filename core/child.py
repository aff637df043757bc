"""Child processes that do not outlive dayone: each runs in its own process group, is sent SIGKILL by the kernel
when dayone dies (PR_SET_PDEATHSIG, Linux), and on a timeout its whole group is killed.

A SIGKILLed `integrate run` left the Megatron check running: subprocess.run's child keeps going when its parent
is killed, and on a timeout it kills the child alone, not the rank processes the child spawned (torch's spawn sets
their own parent-death signal, so they follow the child when it dies).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Looked up here, in the parent: the child between fork and exec only calls it (no dlopen, no import there).
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _dies_with_parent(parent: int):
    def setup() -> None:  # runs in the child between fork and exec
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os.kill(os.getpid(), signal.SIGKILL)

    return setup


def run(
    args: list[str],
    *,
    timeout: float | None = None,
    capture_output: bool = False,
    input: str | bytes | None = None,
    check: bool = False,
    **kwargs,
) -> subprocess.CompletedProcess:
    """subprocess.run(args, ...) in a process group of its own that dies with this process; on a timeout the whole
    group is killed, then subprocess.TimeoutExpired is raised as subprocess.run raises it."""
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    setup = _dies_with_parent(os.getpid())
    # preexec_fn and threads: `setup` takes no lock (prctl was looked up before the fork), which is what makes it safe.
    with subprocess.Popen(args, process_group=0, preexec_fn=setup, **kwargs) as proc:  # noqa: PLW1509
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
        except BaseException:
            _kill_group(proc)
            raise
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
