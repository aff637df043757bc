"""Report details of any shape (wrong types, missing keys, long strings, NaN, nesting) never crash the dashboard:
each report is drawn, or its cell says "malformed" naming the file and field (issue 25 item 7)."""

from __future__ import annotations

import json

from dayone.core.errors import InputError
from dayone.dashboard.matrix import MALFORMED, build_matrix
from dayone.dashboard.site import build_site
from dayone.reports.files import load_reports
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_reports import report

SPEC = "fuzz-model"  # not shipped: the model page has no plan to compute, so each build is quick

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30), st.just("x" * 5000),
)  # fmt: skip
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                    max_size=3), max_leaves=12)  # fmt: skip
# The keys the dashboard draws, given values of any shape; plus well-formed rows with one field broken.
DRAWN = ("reason", "levels", "runs", "numerics", "tolerance", "resources", "spec", "stands_in_for", "unreplayed",
         "check", "first_failure")  # fmt: skip
ROW = st.fixed_dictionaries({"capture": JSON | st.text(max_size=5), "layer": JSON | st.integers(-2, 5),
                             "rel_rms": JSON | st.floats(allow_nan=True)})  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stage=st.sampled_from(["spec", "conform", "validate", "compile", "generate"]),
    details=st.dictionaries(st.sampled_from(DRAWN), JSON, max_size=4),
    rows=st.lists(ROW, max_size=3),
)
def test_any_details_are_drawn_or_shown_malformed(tmp_path_factory, stage, details, rows):
    root = tmp_path_factory.mktemp("fuzz")
    if rows:
        details["numerics"] = rows
    doc = {**report(stage, SPEC, "pass", 0, target="sglang" if stage != "spec" else None), "details": details}
    (root / "r.json").write_text(json.dumps(doc, allow_nan=True))
    try:
        reports = load_reports([root / "r.json"])
    except InputError as err:  # what JSON itself refuses (NaN, Infinity): one line naming the file, exit 2
        assert "r.json" in str(err)
        return
    [model] = build_matrix(reports, set())
    build_site(reports, root / "site", pre_release=set(), gpu="h200", gpus=8)  # never raises
    cell = model.cell(stage, "sglang")
    if reports[0].malformed:
        assert cell.state == MALFORMED and "r.json: details." in cell.reason
        assert "r.json: details." in (root / "site" / "index.html").read_text()
