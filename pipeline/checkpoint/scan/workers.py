"""Every shard header of a checkpoint proven or read, and compared with the manifest, in forked worker processes.

A K3 release has 497k tensors in 96 shards; reading their headers is most of what `integrate inspect` does. The
workers are forked once the manifest's tables exist (small: expert names are built in the workers, on first use),
each takes a contiguous run of shards (a layer's experts straddle neighbouring shards, and a writer fills shards
with consecutive runs), and sends back one ShardComparison per shard: counts, bytes per dtype, only the names that
are off, and the shard's names sorted for the parent's index check. A header no proof holds
(dayone.checkpoint.scan.proof) is read by the plain reader (`read_header`, `compare_entries`), which names what is
wrong.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

from dayone.checkpoint.coverage import ShardComparison, compare_entries
from dayone.checkpoint.safetensors_header import read_header, read_header_bytes
from dayone.checkpoint.scan.proof import Expected, RunChain, prove_header
from dayone.core.errors import InputError


def scan_one(path: Path, file: str, expected: Expected, chain: RunChain) -> ShardComparison | InputError:
    """The ShardComparison of one shard, or the InputError that names what is wrong with it."""
    try:
        raw, data_start, file_size = read_header_bytes(path)
    except InputError as err:
        return err
    result = prove_header(raw, file_size - data_start, path, file, expected, chain)
    if result is not None:
        return result
    try:
        header = read_header(path)
    except InputError as err:
        return err
    result = compare_entries(file, header.entries, header.bytes_by_dtype, expected.table)
    result.names_text = "\n".join(sorted(header.entries)).encode()  # read_header refuses a name holding a newline
    return result


def scan_shards(jobs: list[tuple[Path, str]], expected: Expected, workers: int | None = None) -> list:
    """scan_one for every (path, file name), in order, in `workers` forked processes (default: one per core)."""
    count = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if count == 1:
        return _scan_part(jobs, expected)
    parts = [jobs[len(jobs) * i // count : len(jobs) * (i + 1) // count] for i in range(count)]
    running: list[Forked] = []
    try:
        for part in parts:
            running.append(Forked(_scan_part, part, expected))
        return [result for worker in running for result in worker.result()]
    finally:
        for worker in running:
            worker.close()


def _scan_part(jobs: list[tuple[Path, str]], expected: Expected) -> list:
    chain = RunChain()
    return [scan_one(path, file, expected, chain) for path, file in jobs]


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
