"""The conformance matrix, from run evidence only: target x level x world size, from the latest conform report of
each target (details "runs", as dayone.conform writes them). Each cell links to the run it comes from on the
target's cell page. Refit (the trainer's weights pushed into a running engine) is its own column; where no run
reports it, the column says there is no evidence rather than leaving it out.

Columns are in the ladder's order (dayone.conform.results.LEVELS, then any level a report adds), whatever order a
probe wrote them in. Per engine and world size: the highest level reached in order, with the figures the run gives for it, and the
reason for every level not passed. Figures are whatever a level carries besides status and detail (forward's
log-prob max abs, greedy token agreement, tokens/s, ...): shown by name, never picked from a list here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dayone.conform.results import LEVELS
from dayone.dashboard.matrix import ModelRows
from dayone.dashboard.names import slug
from dayone.reports.model import ConformRun, Report

REFIT = "refit"


@dataclass
class LevelCell:
    level: str
    status: str
    detail: str
    figures: dict[str, Any]
    href: str  # the evidence: the run's row on the target's cell page


@dataclass
class RunRow:
    """One target at one world size: its cells by level, the highest level reached and what stopped it."""

    target: str
    world_size: int
    framework: str | None
    version: str | None
    cells: dict[str, LevelCell]
    highest: str | None = None
    highest_figures: dict[str, Any] = field(default_factory=dict)
    not_passed: list[LevelCell] = field(default_factory=list)

    @property
    def figure_groups(self) -> dict[str, dict[str, Any]]:
        """The highest level's figures by the prefix before their first dot (forward's dtype: "float32.x" ->
        "float32": {"x": ...}), one line each on the page; figures without a prefix under ""."""
        groups: dict[str, dict[str, Any]] = {}
        for name, value in self.highest_figures.items():
            group, dot, short = name.partition(".")
            if not dot:
                group, short = "", name
            groups.setdefault(group, {})[short] = value
        return groups


@dataclass
class ConformMatrix:
    levels: list[str]  # columns, in the probes' order; refit last
    rows: list[RunRow]


def in_ladder(levels: dict) -> list[tuple]:
    """A run's levels as (name, level) up the ladder: LEVELS first, in order, then any other in the run's order."""
    rank = {name: i for i, name in enumerate(LEVELS)}
    return sorted(levels.items(), key=lambda item: rank.get(item[0], len(rank)))


def run_anchor(target: str, world_size: int, level: str | None = None) -> str:
    """The id of a run's row (or one level's row) on the cell page."""
    return f"run-{slug(target)}-ws{world_size}" + (f"-{slug(level)}" if level else "")


def conform_matrix(model: ModelRows) -> ConformMatrix | None:
    """The matrix of the latest conform report of every target of `model` that has runs; None when none has."""
    found: list[tuple[Report, ConformRun, str]] = []
    order = list(LEVELS)  # the conformance ladder; a probe may write its levels in any order (SGLang's sorts them)
    for target in model.targets:
        cell = model.cells.get(("conform", target))
        latest = [r for r in (cell.latest_reports if cell else []) if not r.malformed and r.drawn.runs]
        for report in latest:
            order += [lv.level for lv in report.drawn.levels or [] if lv.level not in order]  # the report's ladder
            for run in sorted(report.drawn.runs or [], key=lambda run: run.world_size):
                found.append((report, run, cell.page))
                order += [name for name in run.levels if name not in order]
    if not found:
        return None
    seen = {name for _, run, _ in found for name in run.levels}
    columns = [name for name in order if name in seen and name != REFIT] + [REFIT]
    return ConformMatrix(columns, [_row(report, run, page, columns) for report, run, page in found])


def _row(report: Report, run: ConformRun, page: str, order: list[str]) -> RunRow:
    target = report.target or "?"
    cells = {
        name: LevelCell(name, lv.status, lv.detail, lv.figures, f"{page}#{run_anchor(target, run.world_size, name)}")
        for name, lv in sorted(run.levels.items(), key=lambda item: order.index(item[0]))
    }
    row = RunRow(target, run.world_size, run.framework, run.version, cells)
    for name, cell in cells.items():  # up the ladder, in order
        if cell.status != "pass":
            break
        row.highest, row.highest_figures = name, cell.figures
    row.not_passed = [c for c in cells.values() if c.status != "pass"]
    return row
