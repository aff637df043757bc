"""The index matrix: one cell per (model spec, stage, target), its state, its history over runs, and the verdict.

Only evidence makes the grid: a stage is a column when some report is of it, a target a row when some report names
it (a stage nobody ran, a target nobody asked for, is not shown as "not run"). A cell of a per-model stage (spec,
coverage, compile, publish) spans all targets of its model. A cell can hold several variants at once (compile: one
per arch); its state is that of the latest run of each variant: failed if any of them failed, passed only if every
one of them passed, else "not run" with the reasons its reports give. A cell never shows pass for something that
did not run. A report with "levels" (a stage that proves a target step by step) shows the last level reached and
why the next one was not. A report whose drawn details do not fit their model is "malformed", naming its file.
Runs are told apart by the reports' `created` time.

The verdict is the release decision: a model is ready only when no cell with evidence is anything but a pass;
every other cell is a blocking reason, stated in words.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from dayone.core.vocabulary import NOT_RUN, PARTIAL, STAGES, TARGETED_STAGES
from dayone.dashboard.names import page_name
from dayone.reports.model import NEEDS_WEIGHTS, TARGETS, LevelRow, Report

HISTORY = 8  # runs shown as marks per cell
WAITING = "waiting for weights"
# Nothing failed, but a level after the last one reached did not run (conformance without a GPU stops before
# forward): never shown as pass; the cell names the level reached and why the next was not.
MALFORMED = "malformed"  # a report is there, but what it says cannot be drawn: its file and field are named
NO_REPORT = "no report"  # no evidence for this target at this stage (not asked, or does not apply): not a verdict


@dataclass
class Cell:
    spec: str
    stage: str
    target: str | None  # None for per-model stages
    reports: list[Report] = field(default_factory=list)  # oldest first
    pre_release: bool = False

    @property
    def page(self) -> str:
        return page_name("cell", self.spec, self.stage, *([self.target] if self.target else []))

    @property
    def latest_reports(self) -> list[Report]:
        latest: dict[tuple, Report] = {}
        for r in self.reports:  # oldest first, so the last one written per variant is the latest
            latest[(r.target, r.arch)] = r
        return list(latest.values())

    @property
    def state(self) -> str:
        if not self.reports:
            return WAITING if self.pre_release and self.stage in NEEDS_WEIGHTS else NO_REPORT
        if any(r.malformed for r in self.latest_reports):
            return MALFORMED
        state = _combined([r.status for r in self.latest_reports])
        if state == "pass" and any(_first_not_reached(r.drawn.levels) for r in self.latest_reports):
            return PARTIAL
        return state

    @property
    def blocking(self) -> bool:
        """Whether this cell keeps its model from release: any evidence that is not a pass."""
        return self.state not in ("pass", NO_REPORT)

    @property
    def reason(self) -> str:
        """Why the cell is not (or not wholly) a pass; empty for a pass without levels left."""
        if not self.reports:
            if self.state == WAITING:
                return "needs the real weights; it runs when they are released"
            return "no report: this stage has not run for this model" + (" and target" if self.target else "")
        reasons = []
        for r in self.latest_reports:
            where = " ".join(v for v in (r.target if self.target is None else None, r.arch) if v)
            if r.malformed:
                reasons.append((f"{where}: " if where else "") + f"malformed: {r.malformed}")
                continue
            reason = r.drawn.stated_reason()
            missing = _first_not_reached(r.drawn.levels)
            if missing:
                reason = f"{missing.level} {missing.status}: {missing.reason or '-'}"
            elif not reason and r.drawn.runs:  # a conformance report: the first level not passed in any run
                reason = next((f"world size {run.world_size}: {name} {lv.status}: {lv.detail or '-'}"
                               for run in r.drawn.runs for name, lv in run.levels.items() if lv.status != "pass"),
                              None)  # fmt: skip
            if r.status != "pass" or reason:
                reasons.append((f"{where}: " if where else "") + (reason or "the report gives no reason"))
        return "; ".join(dict.fromkeys(reasons))

    @property
    def level(self) -> str | None:
        """The last level reached in order, for a cell whose report has levels (None when it has none)."""
        levels = [lv for r in self.latest_reports for lv in (r.drawn.levels or [])]
        if not levels:
            return None
        reached = None
        for lv in levels:
            if lv.status != "pass":
                break
            reached = lv.level
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
    stages: tuple[str, ...] = STAGES  # the columns: stages with evidence
    targets: tuple[str, ...] = TARGETS  # the rows: targets with evidence

    @property
    def page(self) -> str:
        return page_name("model", self.spec)

    def cell(self, stage: str, target: str | None) -> Cell:
        return self.cells[(stage, target if stage in TARGETED_STAGES else None)]

    @property
    def shown_cells(self) -> list[Cell]:
        """The cells of the grid, in column then row order."""
        out = []
        for stage in self.stages:
            for target in self.targets if stage in TARGETED_STAGES else (None,):
                out.append(self.cells[(stage, target)])
        return out

    @property
    def blocking(self) -> list[str]:
        """Every reason this model is not ready, as visible text: "stage target, target: state: why" (targets with
        the same state and reason at one stage on one line)."""
        grouped: dict[tuple[str, str, str], list[str]] = {}
        for c in self.shown_cells:
            if c.blocking:
                grouped.setdefault((c.stage, c.state, c.reason), []).append(c.target or "")
        return [
            f"{' '.join([stage, ', '.join(t for t in targets if t)]).strip()}: {state}" + (f": {why}" if why else "")
            for (stage, state, why), targets in grouped.items()
        ]

    @property
    def ready(self) -> bool:
        return not self.blocking and any(c.state == "pass" for c in self.shown_cells)

    @property
    def reports(self) -> list[Report]:
        return sorted((r for c in self.cells.values() for r in c.reports), key=lambda r: r.created)


def _combined(statuses: list[str]) -> str:
    if "fail" in statuses:
        return "fail"
    return "pass" if statuses and all(s == "pass" for s in statuses) else NOT_RUN


def _first_not_reached(levels: list[LevelRow] | None) -> LevelRow | None:
    return next((lv for lv in levels or [] if lv.status != "pass"), None)


def build_matrix(reports: list[Report], pre_release: set[str]) -> list[ModelRows]:
    """Every spec named by a report or by pre_release, each with the stage x target cells evidence calls for."""
    by_key: dict[tuple[str, str, str | None], list[Report]] = defaultdict(list)
    for r in sorted(reports, key=lambda r: r.created):
        by_key[(r.spec, r.stage, r.target if r.stage in TARGETED_STAGES else None)].append(r)
    seen_stages = {r.stage for r in reports} | (set(NEEDS_WEIGHTS) if pre_release else set())
    stages = tuple(s for s in STAGES if s in seen_stages)
    targets = tuple(t for t in TARGETS if any(r.target == t for r in reports))
    if pre_release and not targets:  # a pre-release model alone: its weight-bound cells still need a row
        targets = ("reference",)
    models = []
    for spec in sorted({r.spec for r in reports} | pre_release):
        waiting = spec in pre_release
        cells = {}
        for stage in STAGES:
            for target in TARGETS if stage in TARGETED_STAGES else (None,):
                cells[(stage, target)] = Cell(spec, stage, target, by_key.get((spec, stage, target), []), waiting)
        models.append(ModelRows(spec, waiting, cells, stages, targets))
    return models
