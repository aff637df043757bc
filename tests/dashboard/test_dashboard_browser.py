"""The dashboard in headless Chromium: matrix states, links, charts, tables; screenshots land in the test's tmp dir.

Chromium comes from the system (Debian package `chromium`), driven by Playwright without `playwright install`.
A missing browser fails these tests: CI installs it, and a skipped browser test would hide a broken dashboard.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from checkpoints import synthesize
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
    synthesize(ckpt, LINEAR, "--skeleton", "--shards", "2")
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


def test_the_model_page_says_where_each_check_ran_and_draws_the_noise_floor(page, tmp_path):
    """A real `integrate validate --report` of a 4-layer stand-in for kimi-k3, its spec report, and generate --check's
    Megatron model check (miles, megatron-bridge) at a tiny scale of the stand-in: the page says, as visible text,
    which widths each ran at (the stand-in's against kimi-k3's, field by field), how validate ran, the Megatron
    log-prob figures; the layer-output chart draws the noise floor."""
    from dayone.spec.registry import load_spec, spec_to_dict
    from dayone.synth.scale import scaled_spec
    from sample_reports import report

    checkpoint = tmp_path / "ck"
    synthesize(checkpoint, K3, "--scale", "tiny", "--layers", "4", "--shards", "1")
    validated = integrate("validate", checkpoint, "--tokens", "1,2,3,4,5,6", "--no-reload-check", "--report",
                          tmp_path / "validate.json", env={"OMP_NUM_THREADS": "1"})  # fmt: skip
    assert validated.code == 0, validated.err
    spec = json.loads((tmp_path / "validate.json").read_text())["spec"]
    stand_in, k3 = scaled_spec(load_spec(K3), "tiny", 4).model_copy(update={"name": spec}), load_spec(K3)
    spec_report = {
        **report("spec", spec, "pass", 0),
        "details": {"spec": spec_to_dict(stand_in), "stands_in_for": spec_to_dict(k3)},
    }
    model = {
        "spec": f"{spec}-tiny", "status": "pass", "layers": 4, "world_size": 4, "tp": 2, "ep": 2,
        "round_trip_tensors": 418, "logprob_abs_diff_mean": 1.854e-07, "logprob_abs_diff_max": 9.537e-07,
        "megatron_train_rollout_logprob_abs_diff": 5.364e-07, "megatron_train_rollout_logprob_abs_diff_max": 1.43e-06,
        "megatron_train_rollout_kl": 2.84e-13, "megatron_bridge_import": "not run: needs transformer_engine",
    }  # fmt: skip
    generate = [
        report("generate", spec, "pass", 0, target=target, check={"problems": {}, "megatron": {"model": model}})
        for target in ("miles", "megatron-bridge")
    ]
    (tmp_path / "r.json").write_text(json.dumps([spec_report, *generate]))
    built = integrate("dashboard", tmp_path / "r.json", tmp_path / "validate.json", "-o", tmp_path / "site")
    assert built.code == 0, built.err
    page.goto((tmp_path / "site" / page_name("model", spec)).as_uri())

    scale = page.locator("section#scale").inner_text()
    assert f"The checkpoint checked is {spec}, a stand-in for {K3}" in scale
    assert "compile and plan at kimi-k3's" in scale
    assert f"num_layers\t4\t{k3.num_layers}" in scale  # a row of the widths table, as the reader sees it
    assert (
        f"generate --check's Megatron model check (miles, megatron-bridge) ran at {spec}-tiny: 4 layers, TP 2 x EP 2"
        in scale
    )

    ran_at = page.locator("p.ran-at").inner_text()
    assert "fast tier vs naive" in ran_at and "1 x 6 tokens" in ran_at and "on cpu" in ran_at
    floor = page.locator("figure.chart.floor polyline.noise-floor")
    assert floor.count() == 1
    box = floor.bounding_box()
    assert box and box["width"] > 50  # drawn across the layers, not only present in the markup
    captures = page.locator("figure.chart[data-capture]").evaluate_all("f => f.map(e => e.dataset.capture)")
    assert {"embed", "logits", "attn_out"} <= set(captures) and len(captures) == len(set(captures))

    rows = page.locator("table.training tbody tr")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.target)") == ["megatron-bridge", "miles"]
    miles = page.locator('table.training tr[data-target="miles"]').inner_text()
    for text in (f"{spec}-tiny: 4 layers, TP 2 x EP 2; 418 tensors round-tripped", "1.854e-07 / 9.537e-07",
                 "5.364e-07 / 1.43e-06", "2.84e-13", "not run: needs transformer_engine", "pass"):  # fmt: skip
        assert text in miles, (text, miles)
    page.screenshot(path=str(tmp_path / "model.png"), full_page=True)
