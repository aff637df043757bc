"""The files a release ships: every regular file directly in DIST, with its size and SHA-256."""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from dayone.core.errors import InputError

CHUNK = 1 << 20


@dataclass(frozen=True)
class LocalAsset:
    name: str
    path: Path
    size: int
    sha256: str

    @property
    def content_type(self) -> str:
        # GitHub requires a Content-Type on upload; wheels and SHA256SUMS have no registered type.
        return mimetypes.guess_type(self.name)[0] or "application/octet-stream"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def local_assets(dist: Path) -> list[LocalAsset]:
    """Top-level regular files of DIST, sorted by name. Release assets are a flat namespace, so sub-folders are not
    walked (the Hub upload takes folders); hidden files (editor and temp files) are left out."""
    dist = Path(dist)
    if not dist.is_dir():
        raise InputError(f"{dist}: not a folder")
    files = sorted(p for p in dist.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError(f"{dist}: no files to publish")
    return [LocalAsset(p.name, p, p.stat().st_size, sha256_file(p)) for p in files]
