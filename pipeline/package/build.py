"""One adapter -> a staged source tree -> PyPA build (dayone.package.pep517) -> a wheel and a normalised sdist.

Why `--no-isolation`: an isolated build installs the newest setuptools from the index into a throw-away env on every
run, which is slower, needs the network, and makes the wheel depend on whatever setuptools is newest that day
(its version is written into the WHEEL file). Without isolation the build uses this environment's setuptools
(declared in dayone's `test` extra next to `build`), so the same environment gives the same bytes.

Determinism: staged files are written in sorted order with fixed permissions (0644 files, 0755 folders) and
mtimes; setuptools' wheel writer takes every zip timestamp from SOURCE_DATE_EPOCH and sorts its entries; the sdist
tarball (which setuptools stamps with file owners and the current time in the gzip header) is rewritten with sorted
members, owner 0 and no names, fixed modes, mtime = SOURCE_DATE_EPOCH and a fixed gzip header.

The staged tree is the adapter as generated, except: pyproject.toml and README.md are rendered from
templates/package/; files outside the import package (Miles' scripts/models/<name>.py) move into it as package data
(`<package>/scripts/models/<name>.py`), so that the sdist and the wheel built from it hold the same files.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

from dayone.core.errors import InputError, environment_error_in
from dayone.package.discover import Adapter
from dayone.present import step


class BuildError(Exception):
    """The build (dayone.package.pep517) failed; `log` holds its output."""

    exit_code = 1

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def require_build() -> None:
    # Checked by distribution metadata, not by import: `import build` may find a local folder named build.
    try:
        metadata.version("build")
    except metadata.PackageNotFoundError:
        raise InputError("PyPA build is needed to package adapters (pip install build)") from None


def stage_source(adapter: Adapter, dest: Path, render: dict[str, str], epoch: int) -> dict[str, list[str]]:
    """Copy the adapter to dest (plus rendered files, {relative path: text}); returns the package data globs."""
    data: dict[str, list[str]] = {}
    for src in sorted(adapter.root.rglob("*")):
        rel = src.relative_to(adapter.root)
        if not src.is_file() or "__pycache__" in rel.parts or rel.parts[0].startswith(".") or rel.suffix == ".pyc":
            continue
        if rel.as_posix() == "pyproject.toml":
            continue  # replaced by the rendered one
        if rel.parts[0] in adapter.packages:
            target = rel
        else:
            package = adapter.packages[0]
            data.setdefault(package, []).append(rel.as_posix())
            target = Path(package, rel)
        _write(dest / target, src.read_bytes(), epoch)
    for rel, text in sorted(render.items()):
        _write(dest / rel, text.encode(), epoch)
    for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), reverse=True):
        folder.chmod(0o755)
        os.utime(folder, (epoch, epoch))
    return data


def _write(path: Path, data: bytes, epoch: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o644)
    os.utime(path, (epoch, epoch))


def run_build(source: Path, out: Path, epoch: int, name: str) -> tuple[Path, Path]:
    """Build the sdist, then the wheel from the sdist (proving the sdist complete); returns (wheel, sdist)."""
    # Absolute: the build runs with cwd=source, where a relative --outdir would name a folder inside the source tree.
    source, out = source.absolute(), out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    step(f"package: {name}: building the sdist, then the wheel from it")  # seconds each: off a terminal, a line
    before = set(out.iterdir())
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    # PyPA build's library with each hook in a fork (dayone.package.pep517: the command's hooks and files, in one
    # interpreter). -P and cwd=source: never import a local folder named `build` (dayone's own checkout has one)
    # instead of PyPA's.
    command = [sys.executable, "-P", "-m", "dayone.package.pep517", str(source), str(out)]
    proc = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, check=False)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        full_or_read_only = environment_error_in(log, out)  # the machine's, not the package's: one line
        if full_or_read_only is not None:
            raise full_or_read_only
        last = next((line for line in reversed(log.splitlines()) if line.strip()), "no output")
        raise BuildError(f"{name}: the build failed: {last.strip()}", log)
    new = sorted(set(out.iterdir()) - before)
    wheels = [p for p in new if p.name.endswith(".whl")]
    sdists = [p for p in new if p.name.endswith(".tar.gz")]
    if len(wheels) != 1 or len(sdists) != 1:
        raise BuildError(f"{name}: the build made {[p.name for p in new]}, expected one wheel and one sdist", log)
    normalise_sdist(sdists[0], epoch)
    return wheels[0], sdists[0]


def normalise_sdist(path: Path, epoch: int) -> None:
    """Rewrite a .tar.gz so that its bytes depend only on its members' names and contents."""
    buffer = io.BytesIO()
    with tarfile.open(path, "r:gz") as src:
        members = sorted(src.getmembers(), key=lambda m: m.name)
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=epoch) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as dst,
        ):
            for member in members:
                info = tarfile.TarInfo(member.name)
                info.type = member.type
                info.size = member.size if member.isfile() else 0
                info.mode = 0o755 if member.isdir() else 0o644
                info.mtime = epoch
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if member.issym() or member.islnk():
                    info.linkname = member.linkname
                dst.addfile(info, src.extractfile(member) if member.isfile() else None)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, path)


def copy_file(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
