"""The README works from a fresh clone: every link and image it has is a file in this repository (a clone has no
../shared, and a reader offline has no web), and it leads with the two commands before any figures."""

from __future__ import annotations

import re

from readme_demo import REPO

README = REPO / "README.md"


def test_every_link_stays_in_the_repository_and_exists():
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links, "the README links its docs"
    for link in links:
        assert "://" not in link and not link.startswith(("/", "..")), link
        assert (REPO / link.split("#")[0]).exists(), link


def test_the_two_commands_come_first_and_the_figures_live_in_docs():
    text = README.read_text()
    first_block = text.index("```bash")
    assert first_block < text.index("## Commands") < text.index("## More")
    assert "bash .ci/setup && .venv/bin/integrate run --demo -o out/demo" in text[first_block : first_block + 200]
    assert "## What to look at afterwards" in text and "site/index.html" in text
    assert "benchmarks/cli.py" not in text  # the performance section moved to docs/performance.md
    assert "benchmarks/cli.py" in (REPO / "docs" / "performance.md").read_text()
