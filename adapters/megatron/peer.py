"""The megatron peer environment: where it is (.venv/peers/megatron, `.ci/setup.d/30-megatron.sh`, or
DAYONE_MEGATRON_PEER) and the megatron-core release it holds. dayone.programs.megatron runs programs there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dayone.adapters.pins import RELEASES

CORE = RELEASES["megatron-core"]
RELEASE = f"megatron_core-{CORE.version}.dist-info"  # what 30-megatron.sh installs, from the same table


def peer_path() -> Path:
    return Path(os.environ.get("DAYONE_MEGATRON_PEER") or Path(sys.prefix) / "peers" / "megatron")
