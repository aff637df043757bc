"""The demo run the tests make (tests/readme_demo.py) is the README's first command as written: a README that
changed its command while the tests kept running the old one would be judged by a command no reader types."""

from __future__ import annotations

import re

from readme_demo import README_RUN, REPO


def test_the_demo_run_is_the_readmes_first_command():
    readme = (REPO / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n```", readme, re.DOTALL)
    assert first is not None, "README.md has no bash block"
    assert first.group(1).split(" && ")[-1] == README_RUN, first.group(1)
