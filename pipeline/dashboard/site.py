"""Render the dashboard: index.html (the verdict per model, the conformance matrix, the stage matrix), model-*.html
(verdict, conformance, scale, numerics, training parity, kernel resources, plan), cell-*.html (the reports behind one cell). Page
names are derived by dayone.dashboard.names (slug + hash). Flat folder, relative links, inline SVG and one stylesheet: it works offline from file://.

The site is built in a temporary sibling folder and renamed into place, so a reader (or --serve) never sees half a
site. A folder that was not built by this command is never replaced.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import jinja2
from dayone.core.atomic import staged_folder
from dayone.core.errors import InputError
from dayone.core.vocabulary import ARCHS, NOT_RUN, TARGETED_STAGES
from dayone.dashboard.chart import floor_svg, small_multiples
from dayone.dashboard.conformance import conform_matrix, in_ladder, run_anchor
from dayone.dashboard.matrix import HISTORY, WAITING, ModelRows, build_matrix
from dayone.dashboard.scale import scale_of
from dayone.present import human_bytes, human_count
from dayone.reports.model import Report

MARKER = ".dayone-dashboard"  # says "this folder is ours to replace"
STATIC = ("style.css",)


def build_site(reports: list[Report], out: Path, *, pre_release: set[str], gpu: str, gpus: int | None) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise InputError(f"-o {out}: exists and is not a dashboard built by this command; not replacing it")
    models = build_matrix(reports, pre_release)
    env = _environment()
    conformance = {m.spec: conform_matrix(m) for m in models}
    pages = {
        "index.html": env.get_template("index.html.j2").render(
            models=models,
            conformance=conformance,
            targeted=TARGETED_STAGES,
            history=HISTORY,
            reports=len(reports),
            latest=max((r.created for r in reports), default=None),
            states=(NOT_RUN, WAITING),
        )
    }
    for model in models:
        pages[model.page] = env.get_template("model.html.j2").render(
            model=model, targeted=TARGETED_STAGES, conform=conformance[model.spec], scale=scale_of(model),
            **_model_sections(model, gpu, gpus),
        )  # fmt: skip
        for cell in model.cells.values():  # every cell, shown or not: a link to one never breaks
            pages[cell.page] = env.get_template("cell.html.j2").render(cell=cell, model=model)
    return _write_swap(out, pages)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dayone.templates", "dashboard"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        human_bytes=human_bytes,
        human_count=human_count,
        when=lambda t: t.strftime("%Y-%m-%d %H:%M UTC") if t else "",
        pretty=lambda d: json.dumps(d, indent=2, sort_keys=True, default=str),
        figure=_figure,
        in_ladder=in_ladder,
    )
    env.globals.update(run_anchor=run_anchor)
    return env


def _figure(value) -> str:
    """A level's figure as text: floats to 4 significant digits, none as a dash, anything else as JSON."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _model_sections(model: ModelRows, gpu: str, gpus: int | None) -> dict:
    """What the model page draws: the latest numerics per target (small multiples per capture point, and the layer
    output against the noise floor), the Megatron model's parity figures per RL target (generate --check), the
    latest resource table per arch, the plan."""
    latest_validate: dict[str | None, Report] = {}
    latest_compile: dict[str | None, Report] = {}
    latest_training: dict[str | None, Report] = {}
    for r in model.reports:  # oldest first: later ones overwrite
        if r.malformed:
            continue
        if r.stage == "generate" and r.drawn.check and r.drawn.check.megatron and r.drawn.check.megatron.model:
            latest_training[r.target] = r
        if r.stage == "validate" and r.drawn.numerics:
            latest_validate[r.target] = r
        if r.stage == "compile" and r.drawn.resources:
            latest_compile[r.arch] = r
    charts = []
    for target, r in sorted(latest_validate.items(), key=lambda kv: str(kv[0])):
        rows = [row.model_dump() for row in r.drawn.numerics or []]
        tol = r.drawn.tolerance.rel_rms if r.drawn.tolerance else None
        layers = (r.drawn.unreplayed or {}).get("layers")
        charts.append(
            {
                "target": target or "model",
                "report": r,
                "points": len(rows),
                "tolerance": tol,
                "multiples": small_multiples(rows, tol, target or ""),
                "floor": floor_svg(layers, target or "") if isinstance(layers, list) else None,
                "ran_at": _ran_at(r),
            }
        )
    kernels = [
        _kernel_row(row.model_dump(), r)
        for _, r in sorted(latest_compile.items(), key=lambda kv: _arch_order(kv[0]))
        for row in r.drawn.resources or []
    ]
    plan, plan_error = _plan(model, gpu, gpus)
    training = [
        {"target": target, "report": r, "check": r.drawn.check.megatron.model}
        for target, r in sorted(latest_training.items(), key=lambda kv: str(kv[0]))
    ]
    return {
        "charts": charts,
        "kernels": kernels,
        "training": training,
        "plan": plan and _plan_rows(plan),
        "plan_error": plan_error,
    }


def _ran_at(report: Report) -> str:
    """How a validate report's check ran, from what it records (checkpoint, tiers, tokens, device)."""
    d = report.details
    tokens = d.get("tokens") if isinstance(d.get("tokens"), dict) else {}
    parts = [
        f"checkpoint {d['checkpoint']}" if isinstance(d.get("checkpoint"), str) else None,
        f"{d['candidate']} tier vs {d['reference']}" if d.get("candidate") and d.get("reference") else None,
        f"{tokens.get('batch')} x {tokens.get('length')} tokens" if tokens else None,
        f"routing {d['routing']}" if isinstance(d.get("routing"), str) else None,
        f"on {d['device']}" if isinstance(d.get("device"), str) else None,
    ]
    return "; ".join(str(p) for p in parts if p)


def _arch_order(arch: str | None) -> int:
    return ARCHS.index(arch) if arch in ARCHS else len(ARCHS)  # Hopper before Blackwell, not string order


def _kernel_row(row: dict, report: Report) -> dict:
    """A resource row (dayone.kernels.aot.Resources.as_dict()) with every column the table shows."""
    return {
        "kernel": row.get("kernel", "?"),
        "arch": row.get("arch") or report.arch or "?",
        "registers": row.get("registers", "?"),
        "shared_bytes": row.get("shared_bytes") or 0,
        "spill_bytes": row.get("spill_bytes") or 0,
        "config": row.get("config") or "",
    }


def _plan_rows(plan: dict) -> list[tuple[str, str]]:
    """The plan's figures as (label, value) rows, in the plan's own order, with units."""
    rows = []
    for key, value in plan.items():
        label = key.replace("_", " ")
        if isinstance(value, dict) and "bytes" in key:
            text = ", ".join(f"{k} {human_bytes(v)}" for k, v in value.items())
        elif isinstance(value, dict):
            text = ", ".join(f"{v:,} x {k}" if isinstance(v, int) else f"{k} {v}" for k, v in value.items())
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        elif key.startswith("params"):
            text = human_count(value)
        elif "bytes_per_s" in key:
            text = f"{value / 1e12:,.2f} TB/s"
        elif "bytes" in key:
            text = human_bytes(value)
        elif isinstance(value, float):
            text = f"{value:,.1f}"
        elif isinstance(value, int):
            text = f"{value:,}"
        else:
            text = str(value)
        rows.append((label, text))
    return rows


def _plan(model: ModelRows, gpu: str, gpus: int | None) -> tuple[dict | None, str | None]:
    """The serving plan of the model the reports are about. A run of a small stand-in checkpoint (`integrate run
    --demo`, `--stand-in-for SPEC`) records the spec it stands in for as "stands_in_for" in its spec report: that is
    the model served, and the one its plan stage plans, not the stand-in's few-layer widths. Else the spec the
    latest spec report carries (a derived or scaled spec is not shipped), else the shipped spec of that name."""
    from dayone.spec.planner import make_plan
    from dayone.spec.registry import load_spec, parse_spec
    from dayone.spec.schema import SPEC_NAME_PATTERN

    carried = [r for r in model.reports if r.stage == "spec" and not r.malformed and r.drawn.spec]
    try:
        if carried and carried[-1].drawn.stands_in_for:
            where = f"the spec report of {model.spec}: stands_in_for"
            spec = parse_spec(carried[-1].drawn.stands_in_for, where)
        elif carried:
            spec = parse_spec(carried[-1].drawn.spec, f"the spec report of {model.spec}")
        elif re.fullmatch(SPEC_NAME_PATTERN, model.spec):
            spec = load_spec(model.spec)
        else:  # not a name a spec can have (a report may carry anything): never looked up as a file
            return None, f"{model.spec!r} is not a spec name, and no spec report carries the spec"
        return make_plan(spec, gpu, gpus).as_dict(), None
    except InputError as err:  # a report may name a spec this install does not ship: show the pages without a plan
        return None, str(err)


def _write_swap(out: Path, pages: dict[str, str]) -> Path:
    out = out.absolute()
    with staged_folder(out) as tmp:
        for name, text in pages.items():
            (tmp / name).write_text(text)
        static = resources.files("dayone.templates") / "dashboard"
        for name in STATIC:
            (tmp / name).write_text((static / name).read_text())
        (tmp / MARKER).write_text("built by `integrate dashboard`; replaced whole on each build\n")
    return out
