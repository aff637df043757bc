"""Run several Megatron checks of one spec from one interpreter, each in a child forked from it.

    python -m dayone.programs.megatron.batch SPEC_FILE WORK_DIR CHECK...   (CHECK: verify, miles, megatron-bridge)

Each check alone is a process that imports torch, megatron-core and dayone's adapters (about 3 s of a 4 s adapter
check) before it builds anything. Here they are imported once; each check then runs in a fork of this process, with
its own gloo group, parallel state and module stand-ins, exactly as when it runs alone (nothing has computed with
torch before the fork, so no OpenMP pool is inherited). Prints one JSON object: {check: {"returncode": N, "output":
what the check printed, "errors": its stderr}}.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from pathlib import Path

from dayone.programs.megatron.checks import MODEL_CHECK, PROGRAMS, check_arguments

LAZY_IMPORTS = ("transformers", "megatron.bridge")


def run_forked(check: str, argv: list[str], output: Path, errors: Path) -> int:
    """The check's main() in a forked child, its stdout into `output` and its stderr (C libraries' too) into
    `errors`; the child's exit status."""
    module = importlib.import_module(PROGRAMS[check])
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code
        code = 1
        try:
            sys.stderr = errors.open("w", buffering=1)  # Python's writes, and C libraries' through fd 2
            os.dup2(sys.stderr.fileno(), 2)
            with output.open("w") as out, contextlib.redirect_stdout(out):
                sys.argv = [module.__name__, *argv]
                result = module.main(argv) if check == MODEL_CHECK else module.main()
                code = result if isinstance(result, int) else 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        except BaseException:  # noqa: BLE001 -- the traceback is the check's report, on stderr as when it runs alone
            import traceback

            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main() -> int:
    spec_file, work, checks = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    unknown = [c for c in checks if c not in PROGRAMS]
    if unknown:
        print(f"unknown check {unknown[0]}: one of {', '.join(PROGRAMS)}", file=sys.stderr)
        return 2
    # What every check imports first, imported once (module level only: no torch operation runs here).
    import megatron.core.parallel_state  # noqa: F401
    import torch.distributed  # noqa: F401

    for check in checks:
        importlib.import_module(PROGRAMS[check])
    # What the checks import lazily, several of them each (megatron-bridge: verify's import check and the generated
    # bridge package; transformers: megatron-bridge and Miles' converter): about 1.5 s of one core each time. A
    # failed import leaves nothing behind, and the check that needs it meets the same error and reports it.
    for name in LAZY_IMPORTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    results = {}
    for check in checks:
        output, errors = work / f"{check}.out", work / f"{check}.err"
        code = run_forked(check, check_arguments(check, spec_file, work), output, errors)
        results[check] = {"returncode": code, **{name: path.read_text() if path.is_file() else ""
                                                 for name, path in (("output", output), ("errors", errors))}}  # fmt: skip
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
