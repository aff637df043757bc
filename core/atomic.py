"""Outputs appear whole or not at all: files through a temporary sibling and os.replace, folders through a staging
sibling renamed into place. A killed run leaves at most a hidden .partial sibling, never a half-written output."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dayone.core.redact import redact


def write_atomic(path: Path, text: str) -> None:
    """Write text to path via a temporary sibling and a rename: readers never see half a file. No secret the
    process holds is written (reports quote servers, which may echo a token)."""
    text = redact(text)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def staged_folder(out_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder beside out_dir; on success it replaces out_dir, on any error it is removed."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        swap_in(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def swap_in(new: Path, dest: Path) -> None:
    """Put the complete folder `new` at `dest`. An existing dest is moved aside first and removed only once new is
    in place, so dest is always either the whole old folder or the whole new one."""
    new, dest = Path(new), Path(dest)
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
