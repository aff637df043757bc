"""End to end two ways: routing replayed from the reference (judged by the tolerance table) and the candidate routing
itself (judged against the noise floor measured in the same run: the reference tier in bf16).

On a K3 whose routers tie within bf16 resolution, the fast tier's un-replayed logits are far outside the table
(the old verdict: FAIL) while every replayed figure is within it and the un-replayed ones are within k x the floor
(pass). A defect planted in one fast-tier op fails both ways."""

from __future__ import annotations

import pytest
from dayone.validate import Options
from dayone.validate.floor import FLOOR_K
from near_tied import near_tied_k3
from validate_fixtures import validated

TOKENS = None  # the built-in 2 x 72 tokens: enough positions for a top-1 fraction to mean something


@pytest.fixture(scope="module")
def near_tied(tmp_path_factory):
    return near_tied_k3(tmp_path_factory.mktemp("near-tied") / "k3-near-tied", layers=13, seed=0)


def _logits_e2e(report: dict) -> dict:
    return next(r for r in report["details"]["end_to_end"] if r["capture"] == "logits" and r["judged"])


def test_near_tied_routers_are_noise_not_a_bug(near_tied):
    report = validated(near_tied, Options(reference="naive", tokens=TOKENS, reload_check=False))
    d = report["details"]
    u = d["unreplayed"]
    # the routers do tie: the fast tier's own choices differ from the reference's well beyond an ordinary K3's ~1%
    assert min(r["agreement"] for r in d["router"]) < 0.95
    # old verdict: the un-replayed figures judged by the table alone fail, by a wide margin
    c, f = u["candidate"], u["floor"]
    assert c["logits_rel_rms"] > 2 * u["verdicts"]["logits_rel_rms"]["table_bound"]  # 0.05
    assert c["top1_disagreement"] > 2 * u["verdicts"]["top1_disagreement"]["table_bound"]  # 0.05
    # new verdict: green, replayed within the table, un-replayed within k x the floor measured in this run
    assert report["status"] == "pass", d["first_failure"]
    assert all(r["passed"] for r in d["numerics"]) and all(r["passed"] for r in d["router"])
    replayed = _logits_e2e(report)
    assert replayed["passed"] and replayed["rel_rms"] < 0.05 and d["logprobs"]["passed"]
    assert u["passed"] and u["k"] == FLOOR_K and u["floor_tier"].startswith("reference tier in bf16")
    assert set(u["verdicts"]) == {
        "logits_rel_rms",
        "mean_abs",
        "kl_mean",
        "top1_disagreement",
        "logits_nonfinite_agree",
    }
    for name in ("logits_rel_rms", "mean_abs", "kl_mean"):
        verdict = u["verdicts"][name]
        assert verdict["passed"] and verdict["bound"] == max(verdict["table_bound"], FLOOR_K * f[name])
    # top-1: k times the floor's flip count plus two standard deviations of it (a count of 144 positions)
    flips = round(f["top1_disagreement"] * 144)
    top1 = u["verdicts"]["top1_disagreement"]
    assert top1["passed"] and top1["bound"] == pytest.approx(FLOOR_K * (flips + 2 * flips**0.5) / 144)
    assert c["p95_abs"] > 0 and f["p95_abs"] > 0  # reported beside, not judged
    # the floor is a real measurement of the same drift: bf16 alone moves the reference tier as far
    assert f["logits_rel_rms"] > 0.05 and f["top1_disagreement"] > 0.05
    assert 0.5 < c["logits_rel_rms"] / f["logits_rel_rms"] < FLOOR_K
    # per layer, both drifts are reported (layer output and own top-k agreement against the reference)
    layers = {row["layer"]: row for row in u["layers"]}
    assert set(layers) == set(range(13))
    assert {"candidate_rel_rms", "floor_rel_rms", "candidate_topk_agreement", "floor_topk_agreement"} <= set(layers[1])
    assert d["seconds"]["floor"] > 0
    # the human report gives both end-to-end views and the floor
    from dayone.reports.model import Report
    from dayone.validate import report as rendering

    with rendering.console.capture() as captured:
        rendering.print_report(Report.model_validate(report))
    text = " ".join(captured.get().split())
    assert "end to end, routing replayed: logits rel_rms" in text
    assert f"(floor {f['logits_rel_rms']:.3e})" in text and "bound max(table, 2 x floor) ok" in text


def test_routing_own_is_the_strict_mode(near_tied):
    """--routing own: the candidate routes itself in every run, the layer-local one included, and the table judges
    that (red here: the flips move the routed experts' sum); the un-replayed view is then the main end-to-end run
    itself, still within the floor."""
    report = validated(near_tied, Options(reference="naive", routing="own", tokens=TOKENS, reload_check=False))
    d = report["details"]
    assert d["routing"] == "own" and report["status"] == "fail"
    first = d["first_failure"]
    assert first["layer"] == 1 and first["capture"] in ("topk_weights", "latent_combined", "latent_normed")
    u = d["unreplayed"]
    assert u["passed"] and u["candidate"]["logits_rel_rms"] == _logits_e2e(report)["rel_rms"]


def _plant(monkeypatch, factor: float) -> None:
    """A defect in one fast-tier op: the routed experts' combine (weighted sum and latent norm) times `factor`."""
    import dayone.kernels.moe_combine as combine

    original = combine.moe_combine
    monkeypatch.setattr(combine, "moe_combine", lambda *args, **kwargs: original(*args, **kwargs) * factor)


def test_a_wrong_sign_fails_replayed_and_against_the_floor(near_tied, monkeypatch):
    _plant(monkeypatch, -1.0)
    report = validated(near_tied, Options(reference="naive", tokens=TOKENS, reload_check=False))
    d = report["details"]
    u = d["unreplayed"]
    assert report["status"] == "fail"
    first = d["first_failure"]
    # the first MoE layer, the combine's first output: its weighted sum (the capture is the op's own, not a recount)
    assert (first["layer"], first["capture"]) == (1, "latent_combined")
    replayed = _logits_e2e(report)
    assert not replayed["passed"] and replayed["rel_rms"] > 0.05 and not d["logprobs"]["passed"]
    assert not u["passed"]
    # red against the floor itself, not only against the table: the bound is k x the floor and it is exceeded
    beyond = [
        n for n, v in u["verdicts"].items() if v.get("floor") and not v["passed"] and v["bound"] > v["table_bound"]
    ]
    assert {"logits_rel_rms", "kl_mean", "top1_disagreement"} <= set(beyond)


def test_a_ten_percent_error_hides_under_the_floor_but_not_under_replay(near_tied, monkeypatch):
    """What the floor is not for: an op 10% off moves the un-replayed figures less than the near-ties do (within
    k x the floor), and the layer-local and replayed comparisons are what flag it."""
    _plant(monkeypatch, 1.1)
    report = validated(near_tied, Options(reference="naive", tokens=TOKENS, reload_check=False))
    d = report["details"]
    assert report["status"] == "fail"
    first = d["first_failure"]
    assert (first["layer"], first["capture"], first["tolerance"]) == (1, "latent_combined", "bf16_model")
    assert d["unreplayed"]["passed"]
