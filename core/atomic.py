"""Outputs appear whole or not at all: files through a temporary sibling and os.replace, folders through a staging
sibling renamed into place. A killed run leaves at most a hidden .partial sibling, never a half-written output."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dayone.core.errors import InputError
from dayone.core.redact import redact


def refuse_special(path: Path) -> None:
    """An output path that exists must be a regular file, a folder or a symbolic link (which the rename replaces,
    never follows). A device node, FIFO or socket is refused: the rename would swap it for a regular file (run as
    root, `-o` naming a copy of /dev/full replaced the node)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError:
        return  # the OS names the ENOTDIR when the write is tried
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        raise InputError(f"{path}: exists and is not a regular file or folder ({_kind(mode)}); refusing to replace it")


def _kind(mode: int) -> str:
    kinds = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device", stat.S_ISFIFO: "a FIFO"}
    return next((name for test, name in kinds.items() if test(mode)), "a socket" if stat.S_ISSOCK(mode) else "special")


def write_atomic(path: Path, text: str) -> None:
    """Write text to path via a temporary sibling and a rename: readers never see half a file. No secret the
    process holds is written (reports quote servers, which may echo a token)."""
    text = redact(text)
    path = Path(path)
    refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with naming(path):
            tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def staged_folder(out_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder beside out_dir; on success it replaces out_dir, on any error it is removed."""
    out_dir = Path(out_dir)
    refuse_special(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        with naming(out_dir):
            yield staging
        swap_in(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """An OSError that names no file (a write() on a full disk) is raised again naming `path`, the output the user
    gave: the one line then says where the disk is full."""
    try:
        yield
    except OSError as err:
        raise named(err, path) from None


def named(err: OSError, path: Path) -> OSError:
    """err, or where it names no file, the same error naming `path`."""
    if err.filename is not None or err.errno is None:
        return err
    return OSError(err.errno, err.strerror or os.strerror(err.errno), str(path))


def swap_in(new: Path, dest: Path) -> None:
    """Put the complete folder `new` at `dest`. An existing dest is moved aside first and removed only once new is
    in place, so dest is always either the whole old folder or the whole new one."""
    new, dest = Path(new), Path(dest)
    refuse_special(dest)
    if not dest.exists():
        new.rename(dest)
        return
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    dest.rename(old)
    try:
        new.rename(dest)
    except OSError:
        old.rename(dest)
        raise
    shutil.rmtree(old, ignore_errors=True)
