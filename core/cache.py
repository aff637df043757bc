"""Where dayone keeps what it reuses across runs: $DAYONE_CACHE, by default ~/.cache/dayone (the frameworks' sources
the static checks read, the Megatron checks' passing reports)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("DAYONE_CACHE") or Path.home() / ".cache" / "dayone")
