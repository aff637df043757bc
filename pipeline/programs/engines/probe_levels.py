"""What a session program (sglang_session.py, vllm_session.py) reads of its probe's output before the forwards."""

from __future__ import annotations

import json
from pathlib import Path


def probe_passed(out: Path) -> bool:
    """Whether the probe wrote its levels with none failed: the forwards after a failed probe would load what the
    probe could not, and the driver judges none of them (forward is "not run" after a failed level)."""
    try:
        levels = json.loads((out / "levels.json").read_text())["levels"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(isinstance(level, dict) and level.get("status") != "fail" for level in levels.values())
