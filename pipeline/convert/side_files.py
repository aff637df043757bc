"""A checkpoint's small companion files (tokenizer, chat template, remote code, generation config)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dayone.checkpoint.reader import INDEX_NAME, PICKLE_SUFFIXES

WEIGHT_SUFFIXES = (".safetensors", ".gguf", *PICKLE_SUFFIXES)


def copy_side_files(src: Path, dst: Path) -> list[str]:
    """Copy SRC's top-level regular files other than weights, the index and config.json (each atomically)."""
    copied = []
    for path in sorted(src.iterdir()):
        name = path.name
        if name.startswith(".") or not path.is_file() or name.endswith(WEIGHT_SUFFIXES):
            continue
        if name in (INDEX_NAME, "config.json"):
            continue
        tmp = dst / f".{name}.tmp-{os.getpid()}"
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, dst / name)
        finally:
            tmp.unlink(missing_ok=True)
        copied.append(name)
    return copied
