"""Refresh docs/images/dashboard.png, the README's picture of the dashboard, from a demo run's site:

    .venv/bin/python docs/images/screenshot.py out/demo/site

The top of index.html (the release decision and the conformance table) at the README's size, in the system
Chromium (Debian package `chromium`, or $DAYONE_CHROMIUM) driven by Playwright, as the dashboard's browser tests do.
Run it after the demo whenever the dashboard or the demo's outcome changes: the picture must show what a newcomer's
run shows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

WIDTH, HEIGHT = 1280, 1000  # the README shows the decision and the conformance table, not the whole page
OUT = Path(__file__).resolve().parent / "dashboard.png"


def main(site: Path) -> None:
    from playwright.sync_api import sync_playwright

    index = site.resolve() / "index.html"
    if not index.is_file():
        sys.exit(f"{index}: no dashboard here (run `integrate run --demo -o out/demo` first)")
    chromium = os.environ.get("DAYONE_CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(index.as_uri())
        page.screenshot(path=str(OUT))
        browser.close()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
