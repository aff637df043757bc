"""The framework releases generated code is checked against, fetched once into a cache as Python sources.

Wheels come through `pip download --no-deps` (SGLang 39 MB, megatron-core 2.6 MB, megatron-bridge 0.8 MB). vLLM's
wheel is 336 MB, so vLLM is checked against its 47 MB sdist, fetched from the package index's JSON API (PEP 691)
and verified against the index's sha256: `pip download` of an sdist would run its build backend, and nothing of
a release is imported or executed here. Only the `.py` files of the release's top-level packages are kept, under
$DAYONE_CACHE/frameworks/<name>-<version>/ (default ~/.cache/dayone); a later run finds them and downloads nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from dayone.adapters.pins import Release
from dayone.core import untrusted_json
from dayone.core.atomic import swap_in
from dayone.core.cache import cache_root
from dayone.core.errors import InputError

INDEX_URL = "https://pypi.org/simple"


def cache_dir() -> Path:
    return cache_root() / "frameworks"


def sources(release: Release) -> Path:
    """The folder holding the release's Python sources (fetched and unpacked on first use)."""
    dest = cache_dir() / release.key
    if (dest / ".complete").is_file():
        return dest
    with tempfile.TemporaryDirectory(prefix="dayone-fetch-") as tmp:
        archive = (
            _download_wheel(release, Path(tmp)) if release.kind == "wheel" else _download_sdist(release, Path(tmp))
        )
        staging = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        _extract_python(archive, staging, release.packages)
        (staging / ".complete").write_text(archive.name + "\n")
        swap_in(staging, dest)
    return dest


def _download_wheel(release: Release, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
           "-d", str(into), f"{release.name}=={release.version}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(into.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise InputError(f"{release.key}: pip download failed: {last}")
    return wheels[0]


def _download_sdist(release: Release, into: Path) -> Path:
    url = f"{os.environ.get('DAYONE_INDEX_URL', INDEX_URL).rstrip('/')}/{release.name}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            listing = untrusted_json.loads(response.read(), f"{release.key}: {url}")
        wanted = f"{release.name}-{release.version}.tar.gz"
        entry = next((f for f in listing["files"] if f["filename"] == wanted), None)
        if entry is None:
            raise InputError(f"{release.key}: the index lists no {wanted}")
        path = into / wanted
        digest = hashlib.sha256()
        with urllib.request.urlopen(entry["url"], timeout=600) as response, open(path, "wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except OSError as err:
        raise InputError(f"{release.key}: cannot fetch the sdist from {url}: {err}") from None
    except (KeyError, TypeError, AttributeError):
        raise InputError(f"{release.key}: {url} answered JSON that is not a package index listing") from None
    if not isinstance(entry.get("hashes"), dict) or digest.hexdigest() != entry["hashes"].get("sha256"):
        raise InputError(f"{release.key}: sha256 of {wanted} does not match the index")
    return path


def _extract_python(archive: Path, dest: Path, packages: tuple[str, ...]) -> None:
    """Copy `<package>/**.py` out of a wheel or sdist (sdist paths start with `<name>-<version>/`)."""
    dest.mkdir(parents=True)

    def keep(member: str) -> str | None:
        parts = member.split("/")
        for start in range(min(2, len(parts))):
            if parts[start] in packages and member.endswith(".py"):
                return "/".join(parts[start:])
        return None

    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                rel = keep(member)
                if rel:
                    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                    (dest / rel).write_bytes(zf.read(member))
        return
    with tarfile.open(archive) as tf:
        for member in tf:
            rel = keep(member.name) if member.isfile() else None
            if rel:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                (dest / rel).write_bytes(tf.extractfile(member).read())
