"""The package README (each wheel's long description) and the model card (dist/<spec>-model-card.md), rendered from
templates/package/. Both are functions of the spec, the packages and the reports only: no dates, so rebuilding gives
the same bytes."""

from __future__ import annotations

from dataclasses import dataclass

from dayone.adapters.targets import common
from dayone.package.discover import ReportFile
from dayone.package.targets import Framework
from dayone.spec.layout import to_expression
from dayone.spec.schema import ModelSpec


@dataclass(frozen=True)
class PackageInfo:
    target: str
    title: str
    dist_name: str  # "dayone-kimi-k3-sglang"
    package: str  # import name
    version: str
    framework: Framework
    wheel: str = ""
    sdist: str = ""


def readme(
    spec: ModelSpec, info: PackageInfo, *, spec_digest: str, generator_version: str, revision: str | None
) -> str:
    return common.render(
        "package/README.md.j2", spec=spec, target=info.target, title=info.title, dist_name=info.dist_name,
        package=info.package, version=info.version, framework=info.framework, spec_digest=spec_digest,
        generator_version=generator_version, checkpoint=spec.release.repo, revision=revision,
        snake=common.snake(spec.name),
    )  # fmt: skip


def model_card(
    spec: ModelSpec,
    packages: list[PackageInfo],
    reports: list[tuple[str, ReportFile]],
    *,
    spec_digest: str,
    generator_version: str,
    revision: str | None,
) -> str:
    """reports: (name in dist, the report file)."""
    texts = common.describe(spec)
    return common.render(
        "package/model_card.md.j2", spec=spec, packages=packages, spec_digest=spec_digest,
        generator_version=generator_version, checkpoint=spec.release.repo, revision=revision,
        attention_text=to_expression(spec.attention_kinds), ffn_text=to_expression(spec.ffn_kinds),
        kda_text=texts["kda_text"], mla_text=texts["mla_text"], activation_text=texts["activation_text"],
        validations=validations(reports), kernels=kernel_rows(reports), snake=common.snake(spec.name),
        conformance=conformance_rows(reports),
        report_files=[{"name": name, "stages": ", ".join(sorted({r.stage for r in f.reports})),
                       "status": _status(f)} for name, f in reports],
    )  # fmt: skip


def _status(f: ReportFile) -> str:
    statuses = {r.status for r in f.reports}
    if "fail" in statuses:
        return "fail"
    return "pass" if statuses == {"pass"} else "not run"


def validations(reports: list[tuple[str, ReportFile]]) -> list[dict]:
    out = []
    for name, f in reports:
        for r in f.reports:
            if r.stage != "validate":
                continue
            d = r.details
            out.append({
                "file": name, "target": r.target or "-", "candidate": d.get("candidate", "?"),
                "reference": d.get("reference", "?"), "checkpoint": d.get("checkpoint", "?"),
                "verdict": _verdict(r.status, d.get("first_failure"), d.get("reason")),
            })  # fmt: skip
    return out


def _verdict(status: str, first: dict | None, reason: str | None = None) -> str:
    if status == "pass":
        return "pass: every judged metric within the tolerance table"
    if status == "not run":
        return f"not run: {reason or 'no reason given'}"
    if not first:
        return "FAIL"
    values = ", ".join(
        f"{k}={v:.3e}" if isinstance(v, float) else f"{k}={v}" for k, v in first.get("values", {}).items()
    )
    return (
        f"FAIL: first break at layer {first.get('layer')}, {first.get('capture')}: {first.get('metric')}"
        + (f" {values}" if values else "")
        + (f" (row {first['tolerance']})" if first.get("tolerance") else "")
    )


# The conformance figures a model card shows, in this order, where a level reports them.
CONFORM_FIGURES = ("float32.logprob_max_abs", "float32.greedy_disagreement", "bfloat16.logprob_mean_abs",
                   "float32.prefill_tokens_per_s", "float32.decode_tokens_per_s")  # fmt: skip


def conformance_rows(reports: list[tuple[str, ReportFile]]) -> list[dict]:
    """Per engine and world size: the highest level reached, the figures of the levels that measured any, and why
    each level that did not pass did not (the conform stage's reports)."""
    rows = []
    for _, f in reports:
        for r in f.reports:
            if r.stage != "conform":
                continue
            for run in r.details.get("runs") or []:
                levels = run.get("levels") or {}
                reached = None
                for name, level in levels.items():
                    if level.get("status") != "pass":
                        break
                    reached = name
                figures = {k: v for level in levels.values() for k, v in (level.get("figures") or {}).items()}
                shown = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in figures.items() if k in CONFORM_FIGURES)  # fmt: skip
                why = "; ".join(f"{name} {lv.get('status')}: {lv.get('detail')}" for name, lv in levels.items()
                                if lv.get("status") != "pass")  # fmt: skip
                rows.append({"target": r.target or "-", "version": run.get("version", "?"),
                             "world_size": run.get("world_size", "?"), "reached": reached or "none",
                             "figures": shown or "-", "not_passed": why or "-"})  # fmt: skip
    return rows


def kernel_rows(reports: list[tuple[str, ReportFile]]) -> list[dict]:
    """Every (kernel, config, arch) in the compile reports, from the newest report that has it."""
    rows: dict[tuple, tuple] = {}
    for _, f in reports:
        for r in f.reports:
            if r.stage != "compile":
                continue
            for row in r.details.get("resources") or []:
                key = (str(row.get("kernel")), str(row.get("config", "")), str(row.get("arch") or r.arch or ""))
                if key not in rows or rows[key][0] <= r.created:
                    rows[key] = (r.created, row)
    return [
        {"kernel": k[0], "config": k[1] or "-", "arch": k[2] or "-", "registers": row.get("registers", "-"),
         "shared_bytes": row.get("shared_bytes", "-"), "spill_bytes": row.get("spill_bytes", "-")}
        for k, (_, row) in sorted(rows.items())
    ]  # fmt: skip
