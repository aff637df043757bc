"""`integrate dashboard` without a browser: report loading and its errors, the matrix rules, atomic rebuilds, --serve."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest
from cli_runner import assert_bad_input, integrate
from dayone.dashboard.chart import numerics_svg
from dayone.dashboard.matrix import build_matrix
from dayone.dashboard.names import page_name
from dayone.reports.files import load_reports
from sample_reports import K3, LINEAR, RUN, conform_reports, report, resources, write_sample_reports


def test_cli_json_lists_every_cell_state(tmp_path):
    expected = write_sample_reports(tmp_path / "reports")
    result = integrate("dashboard", tmp_path / "reports", "-o", tmp_path / "site", "--pre-release", K3, "--json")
    assert result.code == 0, result.err
    states = {(c["spec"], c["stage"], c["target"]): c["state"] for c in json.loads(result.out)["cells"]}
    assert {k: states[k] for k in expected} == expected
    assert (tmp_path / "site" / "index.html").is_file()


def test_latest_run_per_arch_decides_and_history_keeps_order(tmp_path):
    reports_dir = tmp_path / "r"
    reports_dir.mkdir()
    docs = [
        report("compile", LINEAR, "fail", 0, arch="sm_90"),
        report("compile", LINEAR, "pass", 1, arch="sm_90"),
        report("compile", LINEAR, "pass", 1, arch="sm_100"),
        report("compile", LINEAR, "fail", 2, arch="sm_100"),
    ]
    (reports_dir / "all.json").write_text(json.dumps(docs))
    [model] = build_matrix(load_reports([reports_dir]), set())
    cell = model.cell("compile", "sglang")  # per-model stage: any target row shows the one cell
    assert cell.state == "fail"
    assert [status for _, status in cell.history] == ["fail", "pass", "fail"]


def test_stage_outputs_in_their_own_formats_are_read_as_reports(tmp_path):
    (tmp_path / "resources.json").write_text(
        json.dumps(
            {
                "stage": "compile",
                "spec": K3,
                "archs": ["sm_90", "sm_100"],
                "ok": True,
                "seconds": 3.0,
                "kernels": resources("sm_90") + resources("sm_100"),
            }
        )
    )
    (tmp_path / "inspect.json").write_text(
        json.dumps({"ok": False, "checkpoint": "/ckpt", "spec": K3, "expected_tensors": 3, "missing": ["x"]})
    )
    loaded = sorted(load_reports([tmp_path]), key=lambda r: (r.stage, str(r.arch)))
    assert [(r.stage, r.arch, r.status) for r in loaded] == [
        ("compile", "sm_100", "pass"),
        ("compile", "sm_90", "pass"),
        ("coverage", None, "fail"),
    ]
    assert {row["arch"] for row in loaded[0].details["resources"]} == {"sm_100"}


@pytest.mark.parametrize(
    "doc,fragment",
    [
        ({"stage": "deploy", "spec": K3, "status": "pass", "created": RUN[0].isoformat()}, "stage"),
        ({"stage": "spec", "spec": K3, "status": "ok", "created": RUN[0].isoformat()}, "status"),
        ({"stage": "spec", "spec": K3, "status": "pass"}, "created"),
        ({"stage": "compile", "spec": K3, "arch": "sm_80", "status": "pass", "created": RUN[0].isoformat()}, "arch"),
        ([1], "[0]"),
    ],
)
def test_bad_report_is_one_line_naming_file_and_field(tmp_path, doc, fragment):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert_bad_input(integrate("dashboard", path, "-o", tmp_path / "site"), "bad.json", fragment)


def test_not_json_and_missing_paths_are_bad_input(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    assert_bad_input(integrate("dashboard", tmp_path / "broken.json", "-o", tmp_path / "s"), "broken.json")
    assert_bad_input(integrate("dashboard", tmp_path / "nope", "-o", tmp_path / "s"), "nope")


def test_rebuild_replaces_the_site_whole_but_never_a_foreign_folder(tmp_path):
    write_sample_reports(tmp_path / "reports")
    site = tmp_path / "site"
    assert integrate("dashboard", tmp_path / "reports", "-o", site).code == 0
    (site / "stale.html").write_text("from an older build")
    assert integrate("dashboard", tmp_path / "reports", "-o", site).code == 0
    assert not (site / "stale.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports", "site"]  # no temp folders left

    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "keep.md").write_text("not ours")
    assert_bad_input(integrate("dashboard", tmp_path / "reports", "-o", foreign), "docs")
    assert (foreign / "keep.md").read_text() == "not ours"


def test_serve_answers_on_loopback_until_interrupted(tmp_path):
    write_sample_reports(tmp_path / "reports")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dayone",
            "dashboard",
            tmp_path / "reports",
            "-o",
            tmp_path / "s",
            "--serve",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal: a test run started in the background (`pytest ... &` in a script) ignores
        # SIGINT, and the server would inherit that and never stop
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - one call, no lock
    )
    try:
        line = ""
        while "serving" not in line:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "index.html", timeout=10) as response:
            assert b"Compatibility matrix" in response.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_chart_has_a_point_per_measurement_and_marks_those_over_tolerance():
    rows = [{"capture": c, "layer": layer, "rel_rms": v} for c, v in (("a", 1e-5), ("b", 2e-3)) for layer in range(5)]
    rows.append({"capture": "a", "layer": 5, "rel_rms": 0.0})  # bitwise equal: drawn on the floor, not dropped
    svg = numerics_svg(rows, tolerance=1e-3)
    assert svg.count('<circle class="point') == 11
    assert svg.count('class="point over"') == 5
    assert svg.count('<g class="series"') == 2


def test_a_cell_never_shows_pass_for_what_did_not_run_and_says_why(tmp_path):
    """compile passed for sm_90 but was not run for sm_100: the cell is "not run", naming the arch and the reason;
    a stage that waited for a failed one says which."""
    docs = [
        report("compile", LINEAR, "pass", 0, arch="sm_90"),
        report("compile", LINEAR, "not run", 0, arch="sm_100", reason="no sm_100 compiler here"),
        report("package", LINEAR, "not run", 0, target="vllm", reason="needs validate, which did not pass"),
        report("generate", LINEAR, "pass", 0, target="vllm"),
    ]
    (tmp_path / "r.json").write_text(json.dumps(docs))
    reports = load_reports([tmp_path / "r.json"])
    [model] = build_matrix(reports, set())
    compile_cell = model.cell("compile", None)
    assert compile_cell.state == "not run" and compile_cell.reason == "sm_100: no sm_100 compiler here"
    assert [s for _, s in compile_cell.history] == ["not run"]
    package_cell = model.cell("package", "vllm")
    assert package_cell.state == "not run" and "needs validate" in package_cell.reason
    assert model.cell("generate", "vllm").state == "pass" and model.cell("generate", "vllm").reason == ""
    assert model.cell("validate", "sglang").reason == "no report: this stage has not run for this model and target"
    assert model.cell("validate", "sglang").state == "no report" and not model.cell("validate", "sglang").blocking
    result = integrate("dashboard", tmp_path / "r.json", "-o", tmp_path / "site")
    assert result.code == 0, result.err
    index = (tmp_path / "site" / "index.html").read_text()
    # the reason is text in the cell, not a hover-only title (tests/dashboard/test_dashboard_browser.py reads it)
    assert 'data-stage="compile" data-target="" data-state="not run">not run</a>' in index
    assert '<span class="why">sm_100: no sm_100 compiler here</span>' in index
    assert 'title="sm_100' not in index


def test_a_cell_with_levels_shows_the_last_level_reached_and_why_not_the_next(tmp_path):
    levels = [
        {"level": "discovered", "status": "pass"},
        {"level": "loaded", "status": "pass"},
        {"level": "forward", "status": "not run", "reason": "needs a GPU"},
    ]
    (tmp_path / "r.json").write_text(json.dumps([report("validate", LINEAR, "pass", 0, target="vllm", levels=levels)]))
    [model] = build_matrix(load_reports([tmp_path / "r.json"]), set())
    cell = model.cell("validate", "vllm")
    assert cell.level == "loaded" and cell.reason == "forward not run: needs a GPU"
    assert cell.state == "partial"  # the report's status is pass, but forward did not run
    assert integrate("dashboard", tmp_path / "r.json", "-o", tmp_path / "site").code == 0
    assert 'data-level="loaded">reached: loaded' in (tmp_path / "site" / "index.html").read_text()
    page = (tmp_path / "site" / cell.page).read_text()
    assert "needs a GPU" in page and 'id="cell-level">loaded' in page


def test_the_plan_is_of_the_spec_the_reports_carry(tmp_path):
    """A derived or scaled spec is not shipped: the plan comes from the spec in its spec report."""
    from dayone.spec.registry import load_spec, spec_to_dict
    from dayone.synth.scale import scaled_spec

    tiny = scaled_spec(load_spec(K3), "tiny")
    doc = {**report("spec", tiny.name, "pass", 0), "details": {"spec": spec_to_dict(tiny)}}
    (tmp_path / "r.json").write_text(json.dumps([doc]))
    assert integrate("dashboard", tmp_path / "r.json", "-o", tmp_path / "site").code == 0
    page = (tmp_path / "site" / page_name("model", tiny.name)).read_text()
    assert tiny.name == "kimi-k3-tiny" and "No plan" not in page and "decode bound" in page


def test_a_stand_ins_plan_is_of_the_model_it_stands_in_for(tmp_path):
    """A run of a stand-in (`integrate run --stand-in-for kimi-k3`) names it in its spec report: the model page plans
    kimi-k3, as the run's plan stage does, not the stand-in's tiny widths."""
    from dayone.present import human_count
    from dayone.spec.planner import make_plan
    from dayone.spec.registry import load_spec, spec_to_dict
    from dayone.synth.scale import scaled_spec

    k3 = load_spec(K3)
    tiny = scaled_spec(k3, "tiny")
    details = {"spec": spec_to_dict(tiny), "stands_in_for": spec_to_dict(k3)}
    (tmp_path / "r.json").write_text(json.dumps([{**report("spec", tiny.name, "pass", 0), "details": details}]))
    assert integrate("dashboard", tmp_path / "r.json", "-o", tmp_path / "site").code == 0
    page = (tmp_path / "site" / page_name("model", tiny.name)).read_text()
    expected = make_plan(k3, "h200", 8)
    assert "<tr><th>spec</th><td>kimi-k3</td></tr>" in page
    assert f"<tr><th>params total</th><td>{human_count(expected.params_total)}</td></tr>" in page
    assert human_count(expected.params_total) != human_count(make_plan(tiny, "h200", 8).params_total)


def test_the_grid_holds_only_stages_and_targets_with_evidence(tmp_path):
    """No report names miles or publish: neither is a row or column; a per-target stage with reports for some
    targets shows "no report" (not "not run") where it has none, and that does not block the verdict."""
    docs = [report("spec", LINEAR, "pass", 0), report("generate", LINEAR, "pass", 0, target="sglang"),
            report("validate", LINEAR, "pass", 0, target="reference")]  # fmt: skip
    [model] = build_matrix(load_reports_from(tmp_path, docs), set())
    assert model.stages == ("spec", "generate", "validate")
    assert model.targets == ("sglang", "reference")
    assert model.cell("generate", "reference").state == "no report"
    assert model.ready and model.blocking == []


def test_the_verdict_names_every_blocking_reason(tmp_path):
    docs = [report("spec", LINEAR, "pass", 0), report("generate", LINEAR, "fail", 0, target="sglang", reason="boom"),
            report("validate", LINEAR, "not run", 0, target="sglang", reason="needs a GPU"),
            report("validate", LINEAR, "not run", 0, target="vllm", reason="needs a GPU")]  # fmt: skip
    [model] = build_matrix(load_reports_from(tmp_path, docs), set())
    assert not model.ready
    assert model.blocking == ["generate sglang: fail: boom", "validate sglang, vllm: not run: needs a GPU"]


def test_conformance_matrix_is_target_by_level_by_world_size_with_refit_its_own_column(tmp_path):
    from dayone.dashboard.conformance import conform_matrix

    [model] = build_matrix(load_reports_from(tmp_path, conform_reports(0)), set())
    matrix = conform_matrix(model)
    assert matrix.levels == ["discovered", "accepted", "built", "loaded", "forward", "refit"]
    rows = {(r.target, r.world_size): r for r in matrix.rows}
    assert sorted(rows) == [("sglang", 1), ("sglang", 2), ("vllm", 1), ("vllm", 2)]
    assert rows[("vllm", 2)].highest == "forward"
    assert rows[("vllm", 2)].highest_figures == {"logprob_max_abs": 0.0123, "greedy_token_agreement": 1.0,
                                                 "tokens_per_s": 812.5}  # fmt: skip
    assert rows[("sglang", 1)].highest == "loaded"
    assert [(c.level, c.status) for c in rows[("sglang", 2)].not_passed] == [
        ("loaded", "fail"), ("forward", "not run")]  # fmt: skip
    assert "refit" not in rows[("vllm", 1)].cells  # no run reports refit: the column says "no evidence"
    cell = model.cell("conform", "vllm")
    assert rows[("vllm", 2)].cells["forward"].href == f"{cell.page}#run-vllm-ws2-forward"


def test_highest_level_figures_are_grouped_by_their_prefix_one_line_each():
    """forward's figures come per dtype ("float32.logprob_max_abs"): one line per dtype, names without the prefix."""
    from dayone.dashboard.conformance import RunRow

    row = RunRow("vllm", 1, "vllm", "0.32.0", {}, "forward", {"float32.logprob_max_abs": 5e-6, "bfloat16.positions": 37,
                                                            "float32.positions": 37, "seconds": 3.5})  # fmt: skip
    assert row.figure_groups == {"float32": {"logprob_max_abs": 5e-6, "positions": 37}, "bfloat16": {"positions": 37},
                                 "": {"seconds": 3.5}}  # fmt: skip


def test_malformed_details_are_shown_as_malformed_naming_the_file(tmp_path):
    """Drawn details that do not fit their model (a layer that is not a number, a huge reason): the cell says
    malformed with the file and field, the verdict is blocked, and the dashboard still builds."""
    bad_rows = [{"capture": "x", "layer": "three", "rel_rms": 1e-3}]
    docs = [report("validate", LINEAR, "pass", 0, target="reference", numerics=bad_rows),
            report("generate", LINEAR, "fail", 0, target="vllm", reason="r" * 100_000)]  # fmt: skip
    for i, doc in enumerate(docs):
        (tmp_path / f"bad-{i}.json").write_text(json.dumps(doc))
    [model] = build_matrix(load_reports([tmp_path]), set())
    validate = model.cell("validate", "reference")
    assert validate.state == "malformed"
    assert "bad-0.json: details.numerics.0.layer" in validate.reason
    assert model.cell("generate", "vllm").state == "malformed" and "bad-1.json: details.reason" in model.cell(
        "generate", "vllm").reason  # fmt: skip
    assert not model.ready
    result = integrate("dashboard", tmp_path, "-o", tmp_path / "site")
    assert result.code == 0, result.err
    assert "bad-0.json: details.numerics.0.layer" in (tmp_path / "site" / "index.html").read_text()


def test_a_long_spec_name_gets_short_distinct_page_names(tmp_path):
    """A spec name past the file-name limit once crashed the build (OSError: File name too long)."""
    long_a, long_b = "k" * 300 + "a", "k" * 300 + "b"
    docs = [report("spec", long_a, "pass", 0), report("spec", long_b, "pass", 0),
            report("spec", "a b", "pass", 0), report("spec", "a_b", "pass", 0)]  # fmt: skip
    (tmp_path / "r.json").write_text(json.dumps(docs))
    result = integrate("dashboard", tmp_path / "r.json", "-o", tmp_path / "site", "--json")
    assert result.code == 0, result.err
    pages = {c["page"] for c in json.loads(result.out)["cells"]}
    assert all(len(name.encode()) < 120 for name in pages)
    names = [page_name("model", n) for n in (long_a, long_b, "a b", "a_b")]
    assert len(set(names)) == 4 and all((tmp_path / "site" / n).is_file() for n in names)


def load_reports_from(folder, docs):
    path = folder / "reports.json"
    path.write_text(json.dumps(docs))
    return load_reports([path])


def test_a_failed_generate_says_its_first_check_problem(tmp_path):
    check = {"ok": False, "problems": {"byte_compile": [], "api": ["m.py:3: x.y does not exist", "m.py:9: z"]}}
    [model] = build_matrix(load_reports_from(tmp_path, [report("generate", LINEAR, "fail", 0, target="vllm",
                                                                  check=check)]), set())  # fmt: skip
    assert model.cell("generate", "vllm").reason == "api: m.py:3: x.y does not exist (and 1 more)"


def test_conformance_columns_follow_the_ladder_whatever_order_a_probe_wrote(tmp_path):
    """SGLang's probe writes its levels sorted by name (accepted, built, discovered, forward, loaded): the matrix
    still reads discovered -> accepted -> built -> loaded -> forward, and the highest level reached is loaded."""
    from dayone.dashboard.conformance import conform_matrix

    [doc] = [d for d in conform_reports(0) if d["target"] == "sglang"]
    for run in doc["details"]["runs"]:
        run["levels"] = dict(sorted(run["levels"].items()))
    [model] = build_matrix(load_reports_from(tmp_path, [doc]), set())
    matrix = conform_matrix(model)
    assert matrix.levels == ["discovered", "accepted", "built", "loaded", "forward", "refit"]
    assert [r.highest for r in matrix.rows] == ["loaded", "built"]


def test_small_multiples_draw_the_noise_floor_and_put_exact_zeros_on_their_own_line():
    from dayone.dashboard.chart import floor_svg, small_multiples

    rows = [{"capture": c, "layer": i, "rel_rms": 0.0 if i == 0 else 1e-3 * i} for c in ("a", "b") for i in range(4)]
    charts = small_multiples(rows, 5e-2)
    assert [capture for capture, _ in charts] == ["a", "b"]
    svg = charts[0][1]
    assert svg.count('<circle class="point') == 4 and ">0</text>" in svg  # the zero is drawn, on a "0" line
    assert ">1e-3</text>" in svg and "1e-4" not in svg and "1e-12" not in svg  # the non-zero values, no more
    layers = [{"layer": i, "candidate_rel_rms": 0.01 * (i + 1), "floor_rel_rms": 0.02 * (i + 1)} for i in range(3)]
    drawn = floor_svg(layers)
    assert drawn.count('class="noise-floor"') == 1 and drawn.count('<circle class="point') == 3
    assert floor_svg([{"layer": 0, "candidate_rel_rms": 0.1}]) is None  # no floor measured: no chart


def test_a_report_names_this_machines_folders_instead_of_spelling_them_out(tmp_path):
    """A failure's traceback quotes the Python environment's and dayone's own files; a report travels (dashboard,
    release assets), so those folders are named, in the report written and in the site built from it."""
    from pathlib import Path

    import dayone
    from dayone.reports.files import write_report
    from dayone.reports.model import Report

    venv, tree = Path(sys.prefix).resolve(), Path(dayone.__file__).resolve().parents[1]
    quoted = f'File "{venv}/lib/site.py", line 1; File "{tree}/adapters/model/layer.py", line 2'
    doc = report("generate", LINEAR, "fail", 0, target="miles", check={"problems": {"megatron": [quoted]}})
    written = tmp_path / "r.json"
    write_report(written, Report.model_validate(doc))
    text = written.read_text()
    assert str(venv) not in text and str(tree) not in text
    problem = json.loads(text)["details"]["check"]["problems"]["megatron"][0]
    assert problem == 'File "<venv>/lib/site.py", line 1; File "<dayone>/adapters/model/layer.py", line 2'
    assert integrate("dashboard", written, "-o", tmp_path / "site").code == 0
    assert not any(str(tree) in page.read_text() for page in (tmp_path / "site").glob("*.html"))
