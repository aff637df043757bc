"""Render the dashboard: index.html (the matrix), model-*.html (numerics, kernel resources, plan), cell-*.html (the
reports behind one cell). Flat folder, relative links, inline SVG and one stylesheet: it works offline from file://.

The site is built in a temporary sibling folder and renamed into place, so a reader (or --serve) never sees half a
site. A folder that was not built by this command is never replaced.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jinja2
from dayone.core.atomic import staged_folder
from dayone.core.errors import InputError
from dayone.dashboard.chart import numerics_svg
from dayone.dashboard.matrix import HISTORY, NOT_RUN, WAITING, ModelRows, build_matrix
from dayone.dashboard.reports import ARCHS, STAGES, TARGETED_STAGES, TARGETS, Report
from dayone.present import human_bytes, human_count

MARKER = ".dayone-dashboard"  # says "this folder is ours to replace"
STATIC = ("style.css",)


def build_site(reports: list[Report], out: Path, *, pre_release: set[str], gpu: str, gpus: int) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise InputError(f"-o {out}: exists and is not a dashboard built by this command; not replacing it")
    models = build_matrix(reports, pre_release)
    env = _environment()
    pages = {
        "index.html": env.get_template("index.html.j2").render(
            models=models,
            stages=STAGES,
            targets=TARGETS,
            targeted=TARGETED_STAGES,
            history=HISTORY,
            reports=len(reports),
            latest=max((r.created for r in reports), default=None),
            states=(NOT_RUN, WAITING),
        )
    }
    for model in models:
        pages[model.page] = env.get_template("model.html.j2").render(
            model=model, stages=STAGES, targets=TARGETS, targeted=TARGETED_STAGES, **_model_sections(model, gpu, gpus)
        )
        for cell in model.cells.values():
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
    )
    return env


def _model_sections(model: ModelRows, gpu: str, gpus: int) -> dict:
    """What the model page draws: the latest numerics per target, the latest resource table per arch, the plan."""
    latest_validate: dict[str | None, Report] = {}
    latest_compile: dict[str | None, Report] = {}
    for r in model.reports:  # oldest first: later ones overwrite
        if r.stage == "validate" and r.details.get("numerics"):
            latest_validate[r.target] = r
        if r.stage == "compile" and r.details.get("resources"):
            latest_compile[r.arch] = r
    charts = []
    for target, r in sorted(latest_validate.items(), key=lambda kv: str(kv[0])):
        tol = (r.details.get("tolerance") or {}).get("rel_rms")
        charts.append(
            {
                "target": target or "model",
                "report": r,
                "points": len(r.details["numerics"]),
                "svg": numerics_svg(r.details["numerics"], tol, target or ""),
            }
        )
    kernels = [
        _kernel_row(row, r)
        for _, r in sorted(latest_compile.items(), key=lambda kv: _arch_order(kv[0]))
        for row in r.details["resources"]
    ]
    plan, plan_error = _plan(model, gpu, gpus)
    return {"charts": charts, "kernels": kernels, "plan": plan and _plan_rows(plan), "plan_error": plan_error}


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
        if isinstance(value, dict):
            text = ", ".join(f"{k} {human_bytes(v)}" for k, v in value.items())
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


def _plan(model: ModelRows, gpu: str, gpus: int) -> tuple[dict | None, str | None]:
    """The serving plan of the model the reports are about. A run of a small stand-in checkpoint (`integrate run
    --demo`, `--stand-in-for SPEC`) records the spec it stands in for as "stands_in_for" in its spec report: that is
    the model served, and the one its plan stage plans, not the stand-in's few-layer widths. Else the spec the
    latest spec report carries (a derived or scaled spec is not shipped), else the shipped spec of that name."""
    from dayone.spec.planner import make_plan
    from dayone.spec.registry import load_spec, parse_spec

    carried = [r for r in model.reports if r.stage == "spec" and isinstance(r.details.get("spec"), dict)]
    try:
        if carried and isinstance(carried[-1].details.get("stands_in_for"), dict):
            where = f"the spec report of {model.spec}: stands_in_for"
            spec = parse_spec(carried[-1].details["stands_in_for"], where)
        elif carried:
            spec = parse_spec(carried[-1].details["spec"], f"the spec report of {model.spec}")
        else:
            spec = load_spec(model.spec)
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
