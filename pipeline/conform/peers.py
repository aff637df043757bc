"""Where the framework peer environments live and how an adapter is installed into one for a probe run.

A peer is a venv of its own under <main venv>/peers/<framework> (made by .ci/setup.d/NN-<framework>.sh), or the
folder named by $DAYONE_PEERS. dayone is not installed there: the adapter is built into a wheel here and installed
with `pip install --target` into a temporary folder the probe puts on its path, as a user's install would be found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# The engines' programs: scripts each peer runs with its own python (dayone.programs.engines, never imported).
PROBES = Path(__file__).resolve().parents[1] / "programs" / "engines"
# The script that installs each peer environment, from the repository root (.ci/setup runs them all).
SETUP_SCRIPTS = {"vllm": ".ci/setup.d/10-vllm.sh", "sglang": ".ci/setup.d/11-sglang.sh"}


def peers_root() -> Path:
    """The folder of the peer environments, its links resolved. A peer's python finds its packages from the path it
    is started by, and PyTorch's inductor keys each C++ build of a compiled function (vLLM's sampler and embedding
    helpers) by the include paths derived from it: a peers folder reached through a link (a second checkout sharing
    the first one's peers) would build every one of them again into the same cache (5 builds, 11 s of one core in a
    README run here)."""
    return Path(os.environ.get("DAYONE_PEERS") or Path(sys.prefix) / "peers").resolve()


def peer_python(framework: str) -> Path | None:
    """The peer venv's python, or None when the peer is not installed."""
    path = peers_root() / framework / "bin" / "python"
    return path if path.is_file() else None


def probe_script(framework: str) -> Path:
    return PROBES / f"{framework}_probe.py"


def missing(framework: str) -> str:
    """Why a framework's levels did not run when its peer is absent, and the command that installs it."""
    script = SETUP_SCRIPTS.get(framework)
    how = f": `bash {script}` installs it (`bash .ci/setup` installs every peer)" if script else ""
    return f"the {framework} peer environment is not installed{how}"


def forward_script(framework: str) -> Path | None:
    """The framework's forward probe (its engine generating with the adapter), where it has one."""
    path = PROBES / f"{framework}_forward.py"
    return path if path.is_file() else None


def session_script(framework: str) -> Path | None:
    """The framework's session program (a probe and its forwards in one process: one framework import), where it has
    one."""
    path = PROBES / f"{framework}_session.py"
    return path if path.is_file() else None


def install_adapter(source: Path, python: Path, site: Path, scratch: Path) -> None:
    """Build the adapter folder (its pyproject.toml) into a wheel and install it into `site` with the peer's pip."""
    wheels = scratch / "wheel"
    # From a copy: setuptools builds in the source tree (build/, *.egg-info), and the adapter folder is the generate
    # stage's output, which the package stage packs as it is.
    tree = scratch / "adapter"
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    # PyPA build's library, as `pip wheel --no-build-isolation` would build it, with each hook forked (the package
    # stage's builder: dayone.package.pep517).
    _run([sys.executable, "-P", "-m", "dayone.package.pep517", "--wheel-only", str(tree), str(wheels)],
         f"building a wheel of {source}")  # fmt: skip
    built = sorted(wheels.glob("*.whl"))
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), *map(str, built)],
         f"installing {built[0].name} into the peer")  # fmt: skip


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if "is ignored" not in ln and ln.strip()]
        raise RuntimeError(f"{what} failed: {(lines or ['exit ' + str(proc.returncode)])[-1]}")
