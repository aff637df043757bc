"""Build a staged source tree's sdist, then its wheel from that sdist, as `python -m build --no-isolation` does, in one
process: PyPA build's library (`build.ProjectBuilder`) drives the PEP 517 hooks, and each hook runs in a fork of this
process instead of a fresh interpreter.

    python -P -m dayone.package.pep517 SOURCE OUTDIR
    python -P -m dayone.package.pep517 --wheel-only SOURCE OUTDIR    (conform's install: the wheel from the tree)

Why: `python -m build` starts an interpreter for itself and one for each of the four hooks it calls (the
requirements and the build, for the sdist and then the wheel), and each imports setuptools again: about 2 s of CPU
a package, 5 packages a release, most of it imports. Here setuptools is imported once, before any fork, and every
hook still starts from the same clean state, a copy of a process in which no build has run. The hooks, their
arguments, the backend and so the files are the same as the command's; the dependency check is the command's too
(`--no-isolation` builds with this environment's setuptools, so it must be there).

Exit 0 with the files in OUTDIR; 1 with the reason on the last line of stderr; 2 for a wrong command line.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import tarfile
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path


def forked_hook(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
    """pyproject_hooks' runner contract: run `python _in_process.py HOOK CONTROL_DIR` (cmd) in `cwd` with
    `extra_environ` added; here the script runs in a forked child rather than a new interpreter."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child never returns into the parent's code
        code = 1
        try:
            if cwd:
                os.chdir(cwd)
            os.environ.update(extra_environ or {})
            sys.argv = list(cmd[1:])
            runpy.run_path(cmd[1], run_name="__main__")
            code = 0
        except SystemExit as done:  # as the interpreter ends: an int is the status, anything else is printed
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if not isinstance(done.code, int | None):
                print(done.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 -- the hook's traceback is its error output, as in a subprocess
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise subprocess.CalledProcessError(code, list(cmd))


def build_one(builder, distribution: str, out: Path) -> Path:
    missing = builder.check_dependencies(distribution)
    if missing:
        needed = ", ".join(sorted(" -> ".join(chain) for chain in missing))
        raise RuntimeError(f"missing build dependencies for the {distribution}: {needed}")
    return Path(builder.build(distribution, out))


def preload_backend() -> None:
    """Import, once and before any fork, what every hook imports: setuptools' backend and the `egg_info.writers`
    that each of its egg_info runs loads from every installed distribution (four runs a package). One of those in
    dayone's environment is Hugging Face's `kernels` (a transformers dependency), whose import pulls in
    huggingface_hub: 0.7 s each time, more than the rest of the hook."""
    from importlib.metadata import entry_points

    import setuptools.build_meta  # noqa: F401

    for writer in entry_points(group="egg_info.writers"):
        try:
            writer.load()
        except Exception:  # noqa: BLE001, S112 -- the hook that loads it again reports the failure, as it would
            continue


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    wheel_only = args[:1] == ["--wheel-only"]
    if len(args) != 2 + wheel_only:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    source, out = (Path(a).absolute() for a in args[wheel_only:])
    import build

    preload_backend()
    try:
        if wheel_only:  # an install's wheel straight from the tree, as `pip wheel` builds it
            build_one(build.ProjectBuilder(source, runner=forked_hook), "wheel", out)
            return 0
        sdist = build_one(build.ProjectBuilder(source, runner=forked_hook), "sdist", out)
        with tempfile.TemporaryDirectory(prefix="dayone-sdist-") as unpacked:
            with tarfile.open(sdist) as tar:
                tar.extractall(unpacked, filter="data")
            tops = list(Path(unpacked).iterdir())
            if len(tops) != 1:  # an sdist holds one folder, name-version
                raise RuntimeError(f"{sdist.name} holds {len(tops)} top-level entries, not one folder")
            build_one(build.ProjectBuilder(tops[0], runner=forked_hook), "wheel", out)
    except Exception as err:  # noqa: BLE001 -- build's and the backend's errors: the caller reads the last line
        reason = " ".join(str(err).split()) or type(err).__name__
        print(reason, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
