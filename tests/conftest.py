import sys
from pathlib import Path

# tests/ holds shared helpers (cli_runner) imported by test modules in subfolders.
sys.path.insert(0, str(Path(__file__).parent))

# Session fixtures shared across test folders (one demo run per session).
from readme_demo import readme_demo  # noqa: F401
