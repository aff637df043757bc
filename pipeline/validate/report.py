"""The validation report: a dashboard Report (stage "validate") whose details hold every metric, the verdicts, and
the first layer and capture point where a metric breaks; and its human rendering."""

from __future__ import annotations

from dayone.core.numerics import TOLERANCES
from dayone.present import console, shown
from dayone.reports.model import Report, now
from dayone.validate.floor import FLOOR_DESCRIPTION, FLOOR_K, judge
from rich.table import Table


def broken(row: dict) -> list[str]:
    """The metrics of a numerics row that are outside its tolerance row."""
    bound = TOLERANCES[row["tolerance"]]
    out = []
    if not row["nonfinite_agree"]:
        out.append("nonfinite")
    if bound.max_abs is not None and row["max_abs"] > bound.max_abs:
        out.append("max_abs")
    if bound.rel_rms is not None and row["rel_rms"] > bound.rel_rms:
        out.append("rel_rms")
    if bound.cosine is not None and row["cosine"] < bound.cosine:
        out.append("cosine")
    return out


def _failure(check: dict) -> dict:
    kind = check["kind"]
    if kind in ("numerics", "end_to_end"):
        metrics = broken(check)
        capture = check["capture"] + (" (end to end)" if kind == "end_to_end" else "")
        return {"layer": check["layer"], "capture": capture, "metric": ",".join(metrics),
                "values": {m: check[m] for m in metrics if m in check}, "tolerance": check["tolerance"]}  # fmt: skip
    if kind == "router":
        return {"layer": check["layer"], "capture": "router_topk", "metric": "agreement",
                "values": {"agreement": check["agreement"]}, "tolerance": check["tolerance"]}  # fmt: skip
    return {"layer": check["part"], "capture": "reload", "metric": "bitwise", "values": {}, "tolerance": "exact"}


def backend(device: str, ran: dict[str, str]) -> dict:
    """Which implementation ran each fast-tier op (as the model recorded it): Triton kernels or torch counterparts."""
    if not ran:
        return {"device": device, "kernels": "none: the reference tier is plain torch"}
    return {"device": device, "kernels": dict(sorted(ran.items()))}


def unreplayed_block(results: list, rows) -> dict | None:
    """End to end with the candidate routing itself, judged against the noise floor measured in the run."""
    figures = next((r.unreplayed for r in reversed(results) if r.unreplayed is not None), None)
    if figures is None:
        return None
    floor = figures.get("floor")
    verdicts = judge(figures["candidate"], floor, rows)
    return {
        "routing": "own",
        "floor_tier": FLOOR_DESCRIPTION if floor is not None else None,
        "k": FLOOR_K if floor is not None else None,
        "candidate": figures["candidate"],
        "floor": floor,
        "verdicts": verdicts,
        "passed": all(v["passed"] for v in verdicts.values()),
        # per layer: the layer output's rel_rms and the own top-k agreement, candidate and floor, vs the reference
        "layers": [row for r in results for row in r.unreplayed_layers],
    }


def _unreplayed_failure(block: dict) -> dict:
    metric, verdict = next((k, v) for k, v in block["verdicts"].items() if not v["passed"])
    values = {metric: verdict["value"]} if metric != "logits_nonfinite_agree" else {}
    if verdict.get("floor") is not None:
        values["floor"] = verdict["floor"]
    tolerance = verdict.get("table", "nonfinite")
    if block["k"] is not None and metric != "logits_nonfinite_agree":
        tolerance = f"max({tolerance}, {block['k']:g} x floor)"
    return {"layer": "logits", "capture": "logits (routing not replayed)", "metric": metric, "values": values,
            "tolerance": tolerance}  # fmt: skip


def build_report(spec, source, results: list, meta: dict) -> Report:
    checks = [c for r in results for c in r.checks]
    logprobs = next((r.logprobs for r in reversed(results) if r.logprobs is not None), None)

    def of(kind: str, keep_judged: bool = False) -> list[dict]:
        drop = ("kind",) if keep_judged else ("kind", "judged")
        return [{k: v for k, v in c.items() if k not in drop} for c in checks if c["kind"] == kind]

    numerics, end_to_end, reload = of("numerics"), of("end_to_end", keep_judged=True), of("reload")
    router, router_e2e = of("router"), of("router_end_to_end")
    first = next((_failure(c) for c in checks if not c["passed"] and c.get("judged", True)), None)
    if first is None and logprobs is not None and not logprobs["passed"]:
        metric, verdict = next((k, v) for k, v in logprobs["verdicts"].items() if not v["passed"])
        first = {"layer": "logprobs", "capture": "logprobs", "metric": metric, "values": {metric: logprobs[metric]},
                 "tolerance": verdict["tolerance"]}  # fmt: skip
    rows = meta.pop("rows")
    unreplayed = unreplayed_block(results, rows)
    if first is None and unreplayed is not None and not unreplayed["passed"]:
        first = _unreplayed_failure(unreplayed)
    seconds = {side: sum(r.seconds[side] for r in results) for side in ("reference", "candidate", "floor")}
    details = {
        "checkpoint": source.where,
        **meta,
        "backend": backend(meta["device"], {op: b for r in results for op, b in r.backends.items()}),
        "tolerance": {"rel_rms": TOLERANCES[rows.activations].rel_rms, "rows": rows.bounds()},
        "first_failure": first,
        # layer-local: each candidate part read the reference's input state (judged; what the dashboard draws)
        "numerics": numerics or [r for r in end_to_end if r["judged"]],
        # end to end: the candidate on its own state throughout (judged at the logits and log-probs only)
        "end_to_end": end_to_end,
        "router": router,
        "router_end_to_end": router_e2e,
        "logprobs": logprobs,
        # end to end with the candidate's own routing, judged against the noise floor (floor.py)
        "unreplayed": unreplayed,
        "reload": {
            "checked": meta["reload_check"],
            "parts": len(reload),
            "identical": all(r["identical"] for r in reload),
            "entries": reload,
        },
        "seconds": seconds,
    }
    return Report(
        stage="validate", spec=spec.name, target="reference", status="fail" if first else "pass", created=now(),
        details=details,
    )  # fmt: skip


def print_report(report: Report) -> None:
    d = report.details
    tokens = d["tokens"]
    console.print(  # the checkpoint, a golden file and a tokens file are named as the user gave them: escaped
        f"[bold]{shown(d['checkpoint'])}[/]: {d['candidate']} tier vs {shown(d['reference'])} "
        f"({tokens['batch']} x {tokens['length']} tokens from {shown(tokens['source'])}; routing {d['routing']}; "
        f"kernels {_kernels(d['backend'])} on {d['backend']['device']}; {d['ranks']} rank(s))"
    )
    worst: dict[str, dict] = {}
    for row in d["numerics"]:
        best = worst.get(row["capture"])
        if best is None or row["rel_rms"] > best["rel_rms"] or not row["passed"] and best["passed"]:
            worst[row["capture"]] = row
    table = Table("capture", "worst layer", "max_abs", "rel_rms", "cosine", "tolerance", "verdict")
    for capture, row in worst.items():
        table.add_row(capture, str(row["layer"]), f"{row['max_abs']:.2e}", f"{row['rel_rms']:.2e}",
                      f"{row['cosine']:.6f}", row["tolerance"], _verdict(row["passed"]))  # fmt: skip
    if d["router"]:
        low = min(d["router"], key=lambda r: r["agreement"])
        table.add_row("router top-k agreement", str(low["layer"]), "", f"{low['agreement']:.3f}", "", low["tolerance"],
                      _verdict(all(r["passed"] for r in d["router"])))  # fmt: skip
    console.print(table)
    lp = d["logprobs"]
    if lp is not None:
        console.print(
            f"log-probs ({lp['positions']} next-token positions): |diff| mean {lp['mean_abs']:.2e} "
            f"p95 {lp['p95_abs']:.2e} max {lp['max_abs']:.2e}; KL mean {lp['kl_mean']:.2e} max {lp['kl_max']:.2e}; "
            f"top-1 agreement {lp['top1_agreement']:.3f}  {_verdict(lp['passed'])}"
        )
    _print_end_to_end(d)
    rl = d["reload"]
    if rl["checked"]:
        console.print(f"reload check: {rl['parts']} parts reloaded after noise  {_verdict(rl['identical'])}")
    first = d["first_failure"]
    if first is None:
        floor = d.get("unreplayed") and d["unreplayed"]["k"]
        beside = f"; own routing within max(table, {floor:g} x the noise floor)" if floor else ""
        console.print(f"[green]pass[/]: every metric within the tolerance table ({d['comparison']} rows){beside}")
    else:
        values = ", ".join(f"{k}={v:.3e}" for k, v in first["values"].items())
        console.print(
            f"[red]FAIL[/]: first break at layer {first['layer']}, {first['capture']}: {first['metric']} "
            f"{values} (row {first['tolerance']})"
        )


def _print_end_to_end(d: dict) -> None:
    """End to end two ways: with the reference's routing replayed (judged by the table), and with the candidate's
    own routing (judged against k x the noise floor, the reference tier in bf16 routing itself)."""
    logits = next((r for r in d["end_to_end"] if r["capture"] == "logits" and r["judged"]), None)
    lp = d["logprobs"]
    if logits is not None and lp is not None and d["routing"] == "replayed":
        console.print(
            f"end to end, routing replayed: logits rel_rms {logits['rel_rms']:.3e}, top-1 agreement "
            f"{lp['top1_agreement']:.3f}  {_verdict(logits['passed'] and lp['passed'])}"
        )
    u = d.get("unreplayed")
    if u is None:
        return
    c, f = u["candidate"], u["floor"]
    if f is None:
        console.print(
            f"end to end, own routing: logits rel_rms {c['logits_rel_rms']:.3e}, top-1 agreement "
            f"{c['top1_agreement']:.3f} (no bf16 floor for an fp32 comparison: table rows)  {_verdict(u['passed'])}"
        )
        return
    console.print(
        f"end to end, own routing: logits rel_rms {c['logits_rel_rms']:.3e} (floor {f['logits_rel_rms']:.3e}), "
        f"top-1 agreement {c['top1_agreement']:.3f} (floor {f['top1_agreement']:.3f}), |log-prob diff| mean "
        f"{c['mean_abs']:.2e} (floor {f['mean_abs']:.2e}); bound max(table, {u['k']:g} x floor)  {_verdict(u['passed'])}"
    )


def _kernels(b: dict) -> str:
    k = b["kernels"]
    return k if isinstance(k, str) else "/".join(sorted(set(k.values())))


def _verdict(ok: bool) -> str:
    return "[green]ok[/]" if ok else "[red]FAIL[/]"
