"""One function run in a forked process, its result sent back through a pipe: work that overlaps the header scan."""

from __future__ import annotations

import gc
import multiprocessing
from collections.abc import Callable


class Forked:
    """`function(*args)` in a forked child (what it needs is inherited, not sent). `result()` waits for it and
    re-raises what it raised; where the child died (killed, out of memory) the function runs here instead.
    `close()` ends a child whose result is no longer wanted."""

    def __init__(self, function: Callable, *args) -> None:
        self.function, self.args = function, args
        context = multiprocessing.get_context("fork")
        self.conn, child_end = context.Pipe(duplex=False)
        self.process = context.Process(target=_run, args=(function, args, child_end), daemon=True)
        self.process.start()
        child_end.close()
        self.received = False

    def result(self):
        try:
            done = self.conn.recv()
        except EOFError:
            return self.function(*self.args)
        self.received = True
        if isinstance(done, BaseException):
            raise done
        return done

    def close(self) -> None:
        self.conn.close()
        if not self.received:  # unwanted, or failed: nothing it could still send is read
            self.process.kill()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _run(function: Callable, args: tuple, conn) -> None:
    gc.disable()  # hundreds of thousands of objects, none in reference cycles: collections would only rescan them
    try:
        conn.send(function(*args))
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which re-raises it
        try:
            conn.send(err)
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            conn.send(RuntimeError(repr(err)))
    finally:
        conn.close()
