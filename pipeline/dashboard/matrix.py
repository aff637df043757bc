"""The index matrix: one cell per (model spec, stage, target), its state, and its history over runs.

A cell of a per-model stage (spec, coverage, compile, publish) spans all targets of its model. A cell can hold
several variants at once (compile: one per arch); its state is that of the latest run of each variant: failed if
any of them failed, passed only if every one of them passed, else "not run" with the reasons its reports give. A
cell never shows pass for something that did not run. A report with "levels" (a stage that proves a target step
by step) shows the last level reached and why the next one was not. Runs are told apart by the reports' `created`
time.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from dayone.dashboard.reports import NEEDS_WEIGHTS, STAGES, TARGETED_STAGES, TARGETS, Report

HISTORY = 8  # runs shown as marks per cell
NOT_RUN = "not run"
WAITING = "waiting for weights"
# Nothing failed, but a level after the last one reached did not run (conformance without a GPU stops before
# forward): never shown as pass; the cell names the level reached and why the next was not.
PARTIAL = "partial"


@dataclass
class Cell:
    spec: str
    stage: str
    target: str | None  # None for per-model stages
    reports: list[Report] = field(default_factory=list)  # oldest first
    pre_release: bool = False

    @property
    def page(self) -> str:
        parts = [self.spec, self.stage] + ([self.target] if self.target else [])
        return "cell-" + "--".join(slug(p) for p in parts) + ".html"

    @property
    def latest_reports(self) -> list[Report]:
        latest: dict[tuple, Report] = {}
        for r in self.reports:  # oldest first, so the last one written per variant is the latest
            latest[(r.target, r.arch)] = r
        return list(latest.values())

    @property
    def state(self) -> str:
        if not self.reports:
            return WAITING if self.pre_release and self.stage in NEEDS_WEIGHTS else NOT_RUN
        state = _combined([r.status for r in self.latest_reports])
        if state == "pass" and any(_first_not_reached(r.details.get("levels")) for r in self.latest_reports):
            return PARTIAL
        return state

    @property
    def reason(self) -> str:
        """Why the cell is not (or not wholly) a pass; empty for a pass without levels left."""
        if not self.reports:
            if self.state == WAITING:
                return "needs the real weights; it runs when they are released"
            return "no report: this stage has not run for this model" + (" and target" if self.target else "")
        reasons = []
        for r in self.latest_reports:
            reason = r.details.get("reason")
            missing = _first_not_reached(r.details.get("levels"))
            if missing:
                reason = f"{missing.get('level')} {missing.get('status', NOT_RUN)}: {missing.get('reason') or '-'}"
            if r.status != "pass" or reason:
                where = " ".join(v for v in (r.target if self.target is None else None, r.arch) if v)
                reasons.append((f"{where}: " if where else "") + (reason or r.status))
        return "; ".join(dict.fromkeys(reasons))

    @property
    def level(self) -> str | None:
        """The last level reached in order, for a cell whose report has levels (None when it has none)."""
        levels = [lv for r in self.latest_reports for lv in (r.details.get("levels") or []) if isinstance(lv, dict)]
        if not levels:
            return None
        reached = None
        for lv in levels:
            if lv.get("status") != "pass":
                break
            reached = lv.get("level")
        return reached or "none"

    @property
    def history(self) -> list[tuple[datetime, str]]:
        """(created, pass|fail|not run) of the last HISTORY runs, oldest first, combined as the state is."""
        runs: dict[datetime, list[str]] = {}
        for r in self.reports:
            runs.setdefault(r.created, []).append(r.status)
        return sorted((when, _combined(statuses)) for when, statuses in runs.items())[-HISTORY:]

    @property
    def latest(self) -> datetime | None:
        return self.reports[-1].created if self.reports else None


@dataclass
class ModelRows:
    """A model's block in the matrix: a row per target; per-model stage cells span the rows."""

    spec: str
    pre_release: bool
    cells: dict[tuple[str, str | None], Cell]  # (stage, target or None) -> cell

    @property
    def page(self) -> str:
        return f"model-{slug(self.spec)}.html"

    def cell(self, stage: str, target: str | None) -> Cell:
        return self.cells[(stage, target if stage in TARGETED_STAGES else None)]

    @property
    def reports(self) -> list[Report]:
        return sorted((r for c in self.cells.values() for r in c.reports), key=lambda r: r.created)


def _combined(statuses: list[str]) -> str:
    if "fail" in statuses:
        return "fail"
    return "pass" if statuses and all(s == "pass" for s in statuses) else NOT_RUN


def _first_not_reached(levels) -> dict | None:
    return next((lv for lv in levels or [] if isinstance(lv, dict) and lv.get("status") != "pass"), None)


def slug(text: str) -> str:
    """A file-name-safe form of a spec, stage or target name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def build_matrix(reports: list[Report], pre_release: set[str]) -> list[ModelRows]:
    """Every spec named by a report or by pre_release, each with all stage x target cells (empty ones: not run)."""
    by_key: dict[tuple[str, str, str | None], list[Report]] = defaultdict(list)
    for r in sorted(reports, key=lambda r: r.created):
        by_key[(r.spec, r.stage, r.target if r.stage in TARGETED_STAGES else None)].append(r)
    models = []
    for spec in sorted({r.spec for r in reports} | pre_release):
        waiting = spec in pre_release
        cells = {}
        for stage in STAGES:
            for target in TARGETS if stage in TARGETED_STAGES else (None,):
                cells[(stage, target)] = Cell(spec, stage, target, by_key.get((spec, stage, target), []), waiting)
        models.append(ModelRows(spec, waiting, cells))
    return models
