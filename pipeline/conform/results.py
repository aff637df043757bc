"""What conformance reports, typed: a probe run per world size and a target's runs together.

A probe runs in a peer environment and writes levels.json; `read_run` reads it once, at the driver's edge, and
validates it there (another process wrote it): a file that is not what the probes write is one line naming the
field, never a KeyError further on. Past that edge the driver, the `conform` stage and the commands hold these
objects; each becomes JSON once, where it is written or printed (`as_dict`).

`as_dict` gives the bytes conform.json has always had: a run's and a level's keys in the order its probe wrote them
(SGLang's probe sorts them, vLLM's does not), then what the driver added (seconds, problems).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dayone.core.vocabulary import Status
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, field_validator

LEVELS = ("discovered", "accepted", "built", "loaded", "forward")
# The keys of a run the driver makes itself (a probe that did not run), in conform.json's order.
DRIVER_ORDER = ("framework", "version", "world_size", "facts", "levels")


class Level(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    status: Status
    detail: str
    # what the level measured (forward: log-prob differences, greedy agreement, tokens/s), shown with its verdict
    figures: dict[str, float | int | str] | None = None
    _order: tuple[str, ...] = PrivateAttr(default=("status", "detail"))

    def as_dict(self) -> dict:
        fields = {"status": self.status, "detail": self.detail}
        out = {key: fields[key] for key in self._order}
        return out | ({"figures": self.figures} if self.figures is not None else {})


class Run(BaseModel):
    """One probe run at one world size (levels.json), with the driver's additions."""

    model_config = ConfigDict(extra="forbid", strict=True)

    framework: str
    version: str
    world_size: int
    levels: dict[str, Level]  # every level of LEVELS, in the order the probe wrote them
    facts: dict[str, Any]  # what the framework reported of itself; shown, never judged here
    traceback: str | None = None  # vLLM's probe: the failing rank's traceback
    seconds: float | None = None  # added by the driver: the probe's wall time (a session's: all the jobs it ran)
    problems: list[str] | None = None  # added by the driver: the first problems the judge found
    _order: tuple[str, ...] = PrivateAttr(default=DRIVER_ORDER)

    @field_validator("levels")
    @classmethod
    def _every_level(cls, levels: dict[str, Level]) -> dict[str, Level]:
        missing = [name for name in LEVELS if name not in levels]
        unknown = [name for name in levels if name not in LEVELS]
        if missing or unknown:
            raise ValueError(f"levels {', '.join(missing)} missing" if missing else f"unknown level {unknown[0]}")
        return levels

    def reached(self) -> tuple[str | None, str | None]:
        """(highest level passed in order, "level status: detail" of the first level not passed)."""
        best = None
        for name in LEVELS:
            entry = self.levels[name]
            if entry.status != "pass":
                return best, f"{name} {entry.status}: {entry.detail}"
            best = name
        return best, None

    def first_failure(self) -> str | None:
        """ "level: detail" of the first failed level in the probe's order, or None."""
        return next((f"{name}: {e.detail}" for name, e in self.levels.items() if e.status == "fail"), None)

    def as_dict(self) -> dict:
        fields = {
            "framework": self.framework,
            "version": self.version,
            "world_size": self.world_size,
            "levels": {name: entry.as_dict() for name, entry in self.levels.items()},
            "facts": self.facts,
            "traceback": self.traceback,
            "seconds": self.seconds,
            "problems": self.problems,
        }
        order = self._order + tuple(key for key in fields if key not in self._order)
        return {key: fields[key] for key in order if fields[key] is not None}


class TargetReport(BaseModel):
    """conform.json's content for one target: its runs, one per world size."""

    target: str
    framework: str
    version: str
    runs: list[Run]

    @property
    def passed(self) -> bool:
        """No level failed in any run ("not run" is not a failure here; the report says why)."""
        return not any(lv.status == "fail" for run in self.runs for lv in run.levels.values())

    def without_timings(self) -> TargetReport:
        """The report without the probes' wall times (the run stage's files are deterministic)."""
        runs = [run.model_copy(update={"seconds": None}) for run in self.runs]  # the probe's key order kept
        return self.model_copy(update={"runs": runs})

    def as_dict(self) -> dict:
        return {"target": self.target, "framework": self.framework, "version": self.version,
                "runs": [run.as_dict() for run in self.runs]}  # fmt: skip


class MalformedProbeOutput(ValueError):
    """levels.json is not what a probe writes; str() is one line naming the field."""


def read_run(path: Path) -> Run:
    """The run a probe wrote to `path`, validated; the keys' order kept for conform.json."""
    import json

    text = path.read_text()
    try:
        run = Run.model_validate_json(text)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise MalformedProbeOutput(f"{path.name}: {where}: {first['msg']}") from None
    raw = json.loads(text)
    run._order = tuple(raw)
    for name, level in run.levels.items():
        level._order = tuple(raw["levels"][name])
    return run
