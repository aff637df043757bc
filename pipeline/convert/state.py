"""How a rerun knows an output file is finished and correct without reading its data.

After a file is renamed into place, a record goes to DST/.dayone-convert/<file>.json: size, mtime and header hash
of each source file it was made from (its own, plus any file holding one of its MXFP4 scales), and the output's
size and header hash. A file counts as finished only if its record exists, the sources still match it, and the output on disk has the recorded size and header and a header that tiles the
file exactly. A killed run (no record), a truncated or overwritten output, or a changed source is redone. A bit flip
inside the data region is not detected: that would mean hashing the whole output (1.5 TB for K3) on every rerun.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dayone.checkpoint.safetensors_header import read_header
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError

STATE_DIR = ".dayone-convert"


def header_digest(path: Path) -> str:
    """sha256 of the length prefix and JSON header of a safetensors file ('' if it has none readable)."""
    try:
        with open(path, "rb") as f:
            prefix = f.read(8)
            length = int.from_bytes(prefix, "little") if len(prefix) == 8 else 0
            if length > 100 << 20:
                return ""
            return hashlib.sha256(prefix + f.read(length)).hexdigest()
    except OSError:
        return ""


def source_stamp(path: Path) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "header_sha256": header_digest(path)}


def record_path(dst: Path, file: str) -> Path:
    return dst / STATE_DIR / f"{file}.json"


def record(dst: Path, file: str, stamp: dict, kind: str) -> None:
    """stamp: source file name -> source_stamp() of every file the output was made from."""
    out = dst / file
    entry = {
        "kind": kind,
        "source": stamp,
        "output": {"size": out.stat().st_size, "header_sha256": header_digest(out)},
    }
    write_atomic(record_path(dst, file), json.dumps(entry, indent=1) + "\n")


def is_finished(dst: Path, file: str, stamp: dict, kind: str) -> bool:
    path = record_path(dst, file)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    out = dst / file
    if not isinstance(entry, dict) or entry.get("kind") != kind or entry.get("source") != stamp:
        return False
    expected = entry.get("output") or {}
    try:
        if out.stat().st_size != expected.get("size") or header_digest(out) != expected.get("header_sha256"):
            return False
        read_header(out)  # offsets tile the file exactly
    except (OSError, InputError):
        return False
    return True


def forget(dst: Path, file: str) -> None:
    record_path(dst, file).unlink(missing_ok=True)
