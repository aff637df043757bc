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
from dayone.dashboard.names import page_name
from dayone.dashboard.serve import make_server
from sample_reports import CAPTURES, CHART_POINTS, K3, K3_SPEC_MARKS, LINEAR, write_sample_reports

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
    assert page.url.endswith(page_name("model", LINEAR))
    assert page.locator("h1").inner_text().startswith(LINEAR)

    page.goto(f"{base_url}/index.html")
    cell_link(page, LINEAR, "validate", "sglang").click()
    page.wait_for_load_state()
    assert page.url.endswith(page_name("cell", LINEAR, "validate", "sglang"))
    assert page.locator("#cell-state").inner_text() == "fail"
    assert page.locator("tr.report").count() == 1

    page.goto(f"{base_url}/index.html")
    cell_link(page, K3, "validate", "reference").click()
    page.wait_for_load_state()
    assert "needs the real weights" in page.locator("main").inner_text()


def test_model_page_draws_charts_kernels_and_plan(page, base_url, tmp_path):
    page.goto(f"{base_url}/{page_name('model', LINEAR)}")
    for target, points in CHART_POINTS[LINEAR].items():
        group = page.locator(f'.chart-group[data-target="{target}"]')
        svgs = group.locator("svg.numerics")
        # small multiples: one chart per capture point, each one series
        assert svgs.count() == points // 4 == group.locator("g.series").count()
        box = svgs.first.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100  # rendered, not just present
        assert group.locator("circle.point").count() == points
        captions = group.locator("figcaption").all_inner_texts()
        assert captions == list(CAPTURES[: points // 4])
    assert page.locator('.chart-group[data-target="sglang"] circle.over').count() == 1
    assert "tolerance 5e-03 (dashed)" in page.locator('.chart-group[data-target="sglang"] h3').inner_text()
    assert page.locator("table.kernels tbody tr").count() == 4
    assert page.locator("table.kernels tr.spills").count() == 1
    plan = page.locator("table.plan").inner_text()
    assert "decode bound tokens per s" in plan and "params total" in plan
    # counts, not bytes: its ~98 GB of bf16 weights need two H100s (72 GB usable each), one of the others
    assert "min gpus by kind\t2 x h100, 1 x h200, 1 x b200, 1 x gb300" in plan
    page.screenshot(path=str(tmp_path / "model-linear.png"), full_page=True)

    page.goto(f"{base_url}/{page_name('model', K3)}")
    assert page.locator("figure.chart").count() == 0
    assert "Waiting for weights" in page.locator("#numerics").inner_text()
    assert page.locator("table.kernels tbody tr").count() == 8  # 4 kernels x sm_90, sm_100
    assert page.locator(".badge").first.inner_text() == "pre-release"
    page.screenshot(path=str(tmp_path / "model-k3.png"), full_page=True)


def test_the_verdict_is_visible_text_with_every_blocking_reason(page, base_url):
    page.goto(f"{base_url}/index.html")
    linear = page.locator(f'section.verdict[data-spec="{LINEAR}"]').inner_text()
    assert f"{LINEAR}: NOT READY" in linear
    # each blocking reason is on the page as text (reasons were once in title attributes only)
    for reason in ("compile: fail: sm_90", "validate sglang: fail", "conform sglang: fail"):
        assert reason in linear, reason
    k3 = page.locator(f'section.verdict[data-spec="{K3}"]').inner_text()
    assert "NOT READY" in k3 and "waiting for weights" in k3 and "generate vllm: fail" in k3
    matrix = page.locator("table.matrix").inner_text()
    assert "needs the real weights; it runs when they are released" in matrix  # a cell's reason, visible
    assert (
        page.locator("table.matrix tr[data-target]").evaluate_all("rows => rows.map(r => r.dataset.target)")
        == ["sglang", "vllm", "reference"] * 2
    )  # fmt: skip  (only targets with evidence: no miles row)


def test_the_conformance_matrix_links_each_cell_to_its_run(page, base_url, tmp_path):
    page.goto(f"{base_url}/index.html")
    table = page.locator(f'table.conformance[data-spec="{LINEAR}"]')
    header = table.locator("thead th").all_inner_texts()
    assert header == ["target", "world size", "discovered", "accepted", "built", "loaded", "forward", "refit",
                      "highest level reached"]  # fmt: skip
    vllm2 = table.locator('tr[data-target="vllm"][data-world-size="2"]')
    assert vllm2.locator("td.cell").all_inner_texts() == ["pass"] * 5 + ["no evidence"]
    highest = vllm2.locator("td.highest").inner_text()
    assert "forward" in highest and "logprob max abs 0.0123" in highest and "tokens per s 812.5" in highest
    sglang2 = table.locator('tr[data-target="sglang"][data-world-size="2"]')
    assert sglang2.locator("td.highest").inner_text().strip() == "built"
    reasons = page.locator("ul.not-reached").inner_text()
    assert "sglang world size 2: loaded fail: loaded fail at world size 2: needs a GPU" in reasons
    assert "sglang world size 1: forward not run" in reasons
    page.screenshot(path=str(tmp_path / "conformance.png"), full_page=True)
    vllm2.locator('a[data-level="forward"]').click()
    page.wait_for_load_state()
    assert page.url.endswith(f"{page_name('cell', LINEAR, 'conform', 'vllm')}#run-vllm-ws2-forward")
    row = page.locator("#run-vllm-ws2-forward").inner_text()
    assert "forward ok" in row and "greedy token agreement 1" in row


def test_site_works_offline_from_file_urls(page, site):
    page.goto((site / page_name("model", LINEAR)).as_uri())
    assert page.locator("svg.numerics circle.point").count() == sum(CHART_POINTS[LINEAR].values())
    # The stylesheet loaded from disk: a pass badge is coloured, not default black text.
    colour = page.locator(".state.pass").first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
