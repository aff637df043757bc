import sys
from pathlib import Path

# tests/ holds shared helpers (cli_runner) imported by test modules in subfolders.
sys.path.insert(0, str(Path(__file__).parent))
