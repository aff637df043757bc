"""Write one safetensors file as a stream: the header first (from shapes alone), then each tensor's bytes.

Memory stays bounded by one chunk whatever the tensor sizes: copied tensors move through the kernel
(copy_file_range) or an 8 MiB buffer; MXFP4 pairs are dequantized a block of rows at a time. The file is written
under a temporary name beside its final one and renamed into place, so a killed run never leaves a file that looks
finished.
"""

from __future__ import annotations

import errno
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from dayone.checkpoint.writer import encode_header
from dayone.convert.pieces import Copy, Dequant, Piece
from dayone.core.atomic import named

COPY_BUFFER = 8 << 20
CHUNK_BYTES = 4 << 20  # BF16 output per dequantized block of rows: small enough to stay in cache


def write_stream(
    path: Path,
    pieces: list[Piece],
    metadata: dict[str, str],
    progress: Callable[[int], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> int:
    """Write `pieces` in order as the safetensors file `path` (atomically); returns the file size.

    progress(n) is called with the input bytes consumed since the last call.
    """
    header, data_size = encode_header([p.as_tensor() for p in pieces], metadata)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    sources: dict[Path, int] = {}
    scratch = _Scratch()
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sink = _Sink(out)
    try:
        sink.submit(lambda: _write_all(out, header))

        def opened(source: Path) -> int:
            if source not in sources:
                sources[source] = os.open(source, os.O_RDONLY)
            return sources[source]

        for piece in pieces:
            src = piece.source
            if isinstance(src, Copy):
                fd, begin, count = opened(src.path), src.begin, src.end - src.begin
                sink.submit(lambda fd=fd, begin=begin, count=count: _copy_range(fd, out, begin, count, progress))
            else:
                _dequant(opened(src.path), opened(src.scale_path), sink, src, scratch, chunk_bytes, progress)
        sink.close()
        size = os.lseek(out, 0, os.SEEK_CUR)
        if size != len(header) + data_size:
            raise RuntimeError(f"{path}: wrote {size} bytes, the header describes {len(header) + data_size}")
        os.close(out)
        out = -1
        os.replace(tmp, path)
        return size
    except OSError as err:  # a full disk names no file: the one line names the output
        raise named(err, path) from None
    finally:
        sink.close(raise_error=False)
        if out >= 0:
            os.close(out)
        for fd in sources.values():
            os.close(fd)
        tmp.unlink(missing_ok=True)


class _Sink:
    """Runs the writes to the output file in order on one background thread, so the next block of rows is
    dequantized while the last one is written (os.write and torch ops both release the GIL)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.queue: queue.Queue = queue.Queue(maxsize=4)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="convert-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (job := self.queue.get()) is not None:
            if self.error is None:
                try:
                    job()
                except BaseException as err:  # noqa: BLE001 - handed to the submitting thread
                    self.error = err

    def submit(self, job: Callable[[], None]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(job)

    def wait(self, event: threading.Event) -> None:
        """Wait for a buffer's write; a failed write raises here instead of leaving the event unset forever."""
        while not event.wait(0.05):
            if self.error is not None:
                raise self.error

    def close(self, raise_error: bool = True) -> None:
        if self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()
        if raise_error and self.error is not None:
            raise self.error


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_into(fd: int, view: memoryview, offset: int) -> None:
    while view:
        got = os.preadv(fd, [view], offset)
        if got == 0:
            raise EOFError(f"unexpected end of file at offset {offset}")
        view, offset = view[got:], offset + got


_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}


def _copy_range(src: int, dst: int, begin: int, count: int, progress: Callable[[int], None] | None) -> None:
    """Append bytes [begin, begin + count) of src to dst: in the kernel where it can, else through a buffer."""
    offset, left = begin, count
    if hasattr(os, "copy_file_range"):
        try:
            while left:
                done = os.copy_file_range(src, dst, min(left, 1 << 30), offset)
                if done == 0:
                    raise EOFError(f"unexpected end of file at offset {offset}")
                offset, left = offset + done, left - done
                if progress:
                    progress(done)
        except OSError as err:
            if err.errno not in _NO_KERNEL_COPY:
                raise
    buffer = bytearray(min(left, COPY_BUFFER))
    while left:
        view = memoryview(buffer)[: min(left, len(buffer))]
        _read_into(src, view, offset)
        _write_all(dst, view)
        offset, left = offset + len(view), left - len(view)
        if progress:
            progress(len(view))


class _Scratch:
    """Buffers for dequantizing blocks of rows, allocated once per output file and grown only for a wider row
    (fresh multi-megabyte buffers per tensor would cost a page fault per 4 KiB each time). Two output buffers: one
    is filled while the sink writes the other; `free[i]` is set once buffer i has been written."""

    def __init__(self) -> None:
        self.size = 0
        self.turn = 0

    def ensure(self, packed: int, scale: int, sink: _Sink) -> None:
        import torch  # here, not at the top: the CLI's bad-input paths should not pay for importing torch

        if packed <= self.size and scale <= len(self.scale_buf):
            return
        for event in getattr(self, "free", ()):
            sink.wait(event)
        self.size = packed
        self.packed_buf, self.scale_buf = bytearray(packed), bytearray(scale)
        self.out_bufs = [bytearray(4 * packed), bytearray(4 * packed)]
        self.free = [threading.Event(), threading.Event()]
        for event in self.free:
            event.set()
        self.packed = torch.frombuffer(self.packed_buf, dtype=torch.uint8)
        self.scale = torch.frombuffer(self.scale_buf, dtype=torch.uint8)
        self.outs = [torch.frombuffer(buf, dtype=torch.int32) for buf in self.out_bufs]
        self.index = torch.empty(packed, dtype=torch.int32)


def _dequant(
    src: int,
    scale_src: int,
    sink: _Sink,
    d: Dequant,
    scratch: _Scratch,
    chunk_bytes: int,
    progress: Callable[[int], None] | None,
) -> None:
    """Append the BF16 weight of one MXFP4 pair, a block of rows (about chunk_bytes of output) at a time."""
    from dayone.convert.dequant import dequantize_rows

    if d.rows == 0 or d.packed_cols == 0:
        return
    per_row_out = d.packed_cols * 4
    block = max(1, min(d.rows, chunk_bytes // per_row_out))
    scratch.ensure(block * d.packed_cols, block * d.scale_cols, sink)
    for row in range(0, d.rows, block):
        n = min(block, d.rows - row)
        size, scale_size = n * d.packed_cols, n * d.scale_cols
        _read_into(src, memoryview(scratch.packed_buf)[:size], d.packed_begin + row * d.packed_cols)
        _read_into(scale_src, memoryview(scratch.scale_buf)[:scale_size], d.scale_begin + row * d.scale_cols)
        turn = scratch.turn
        scratch.turn ^= 1
        free = scratch.free[turn]
        sink.wait(free)
        free.clear()
        dequantize_rows(
            scratch.packed[:size].view(n, d.packed_cols),
            scratch.scale[:scale_size].view(n, d.scale_cols),
            scratch.outs[turn][:size].view(n, d.packed_cols),
            scratch.index[:size].view(n, d.packed_cols),
        )
        view = memoryview(scratch.out_bufs[turn])[: 4 * size]

        def write(view=view, free=free) -> None:
            try:
                _write_all(sink.fd, view)
            finally:
                free.set()

        sink.submit(write)
        if progress:
            progress(size + scale_size)
