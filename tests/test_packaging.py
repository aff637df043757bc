"""pyproject lists every package folder under the one import root, and none is installed top-level."""

import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def discovered() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in config["package-dir"].items():
        for path, dirs, files in os.walk(ROOT / folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = Path(path).relative_to(ROOT / folder)
                found.add(".".join([name, *rel.parts]) if rel.parts else name)
    return found


def test_every_package_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == discovered()
    assert all(p == "dayone" or p.startswith("dayone.") for p in config["packages"])
