"""The Megatron checks by name: the program each runs and its command line. The runner (main environment) and the
batch (peer environment) both read this table, so neither imports the other."""

from __future__ import annotations

from pathlib import Path

MODEL_CHECK = "verify"

ADAPTER_CHECKS = {
    "miles": "dayone.programs.megatron.check_miles",
    "megatron-bridge": "dayone.programs.megatron.check_bridge",
}
PROGRAMS = {MODEL_CHECK: "dayone.programs.megatron.verify", **ADAPTER_CHECKS}


def check_arguments(check: str, spec_file: str, work: Path) -> list[str]:
    """A check's command line, alone or in a batch: the spec, and for an adapter check the folder it generates into."""
    return [spec_file] if check == MODEL_CHECK else [spec_file, str(work / check)]
