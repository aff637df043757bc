"""The dashboard in headless Chromium: matrix states, links, charts, tables; screenshots land in the test's tmp dir.

Chromium comes from the system (Debian package `chromium`), driven by Playwright without `playwright install`.
A missing browser fails these tests: CI installs it, and a skipped browser test would hide a broken dashboard.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from cli_runner import integrate
from dayone.dashboard.serve import make_server
from sample_reports import CHART_POINTS, K3, K3_SPEC_MARKS, LINEAR, write_sample_reports

CHROMIUM = os.environ.get("DAYONE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    """Reports (with real `integrate inspect --json` coverage of a skeleton checkpoint) -> built site."""
    root = tmp_path_factory.mktemp("dashboard")
    ckpt = root / "ckpt"
    assert integrate("synth", LINEAR, "--skeleton", "-o", ckpt, "--shards", "2").code == 0
    inspected = integrate("inspect", ckpt, "--spec", LINEAR, "--json")
    assert inspected.code == 0, inspected.err
    (root / "coverage.json").write_text(inspected.out)
    expected = write_sample_reports(root / "reports", root / "coverage.json")
    built = integrate("dashboard", root / "reports", "-o", root / "site", "--pre-release", K3)
    assert built.code == 0, built.err
    return root / "site", expected


@pytest.fixture(scope="module")
def site(built) -> Path:
    return built[0]


@pytest.fixture(scope="module")
def expected(built) -> dict:
    return built[1]


@pytest.fixture(scope="module")
def base_url(site):
    server = make_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install it (Debian: apt-get install -y chromium) or set "
            "DAYONE_CHROMIUM; the dashboard browser tests need it",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install playwright (never `playwright install`)", pytrace=False)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def cell_link(page, spec: str, stage: str, target: str | None):
    return page.locator(f'a.state[data-spec="{spec}"][data-stage="{stage}"][data-target="{target or ""}"]')


def test_matrix_shows_each_cell_state(page, base_url, expected, tmp_path):
    page.goto(f"{base_url}/index.html")
    for (spec, stage, target), state in expected.items():
        link = cell_link(page, spec, stage, target)
        assert link.count() == 1, (spec, stage, target)
        assert link.get_attribute("data-state") == state, (spec, stage, target)
        assert link.inner_text().strip() == state
    marks = page.locator(f'td:has(> a.state[data-spec="{K3}"][data-stage="spec"]) i.mark')
    assert [m.get_attribute("class").split()[-1] for m in marks.all()] == K3_SPEC_MARKS
    page.screenshot(path=str(tmp_path / "index.png"), full_page=True)


def test_links_navigate_to_detail_pages(page, base_url):
    page.goto(f"{base_url}/index.html")
    page.locator(f'a.model-link:text-is("{LINEAR}")').click()
    page.wait_for_load_state()
    assert page.url.endswith(f"model-{LINEAR}.html")
    assert page.locator("h1").inner_text().startswith(LINEAR)

    page.goto(f"{base_url}/index.html")
    cell_link(page, LINEAR, "validate", "sglang").click()
    page.wait_for_load_state()
    assert page.url.endswith(f"cell-{LINEAR}--validate--sglang.html")
    assert page.locator("#cell-state").inner_text() == "fail"
    assert page.locator("tr.report").count() == 1

    page.goto(f"{base_url}/index.html")
    cell_link(page, K3, "validate", "reference").click()
    page.wait_for_load_state()
    assert "needs the real weights" in page.locator("main").inner_text()


def test_model_page_draws_charts_kernels_and_plan(page, base_url, tmp_path):
    page.goto(f"{base_url}/model-{LINEAR}.html")
    for target, points in CHART_POINTS[LINEAR].items():
        figure = page.locator(f'figure.chart[data-target="{target}"]')
        svg = figure.locator("svg.numerics")
        assert svg.count() == 1
        box = svg.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 100  # rendered, not just present
        assert figure.locator("circle.point").count() == points
        assert figure.locator("g.series").count() == points // 4
    assert page.locator('figure.chart[data-target="sglang"] circle.over').count() == 1
    assert page.locator("table.kernels tbody tr").count() == 4
    assert page.locator("table.kernels tr.spills").count() == 1
    plan = page.locator("table.plan").inner_text()
    assert "decode bound tokens per s" in plan and "params total" in plan
    page.screenshot(path=str(tmp_path / "model-linear.png"), full_page=True)

    page.goto(f"{base_url}/model-{K3}.html")
    assert page.locator("figure.chart").count() == 0
    assert "Waiting for weights" in page.locator("#numerics").inner_text()
    assert page.locator("table.kernels tbody tr").count() == 8  # 4 kernels x sm_90, sm_100
    assert page.locator(".badge").first.inner_text() == "pre-release"
    page.screenshot(path=str(tmp_path / "model-k3.png"), full_page=True)


def test_site_works_offline_from_file_urls(page, site):
    page.goto((site / f"model-{LINEAR}.html").as_uri())
    assert page.locator("svg.numerics circle.point").count() == sum(CHART_POINTS[LINEAR].values())
    # The stylesheet loaded from disk: a pass badge is coloured, not default black text.
    colour = page.locator(".state.pass").first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
