"""The stage report: one JSON document per stage run, the only thing the dashboard reads.

    {"stage": "compile", "spec": "kimi-k3", "target": null, "arch": "sm_90", "status": "pass",
     "created": "2026-05-01T12:00:00Z", "details": {...}}

stage    spec | coverage | generate | compile | validate | package | publish
spec     the model spec's name (spec/models/<name>.yaml)
target   sglang | vllm | miles | megatron-bridge | reference, or null for stages that are not per target
arch     sm_90 | sm_100 for compile reports, else null
status   pass | fail | not run (details "reason" says why: a stage it needs failed, or what it would need)
created  ISO 8601 timestamp of the run (no zone = UTC); reports with different `created` are different runs
details  free-form per stage; the dashboard draws these keys when present:
         validate: "numerics": [{"capture": str, "layer": int, "rel_rms": float, ...}], "tolerance": {"rel_rms": x}
         compile:  "resources": [rows of dayone.kernels.aot.Resources.as_dict(): kernel, config, arch, registers,
                   shared_bytes, spill_bytes, ...]
         coverage: the `integrate inspect --json` document; "synthetic": true for a skeleton checkpoint
         spec:     "spec": the spec itself (spec_to_dict), so a derived or scaled spec can be planned
         conform:  "runs": [{"world_size": int, "levels": {name: {"status", "detail", figures...}}, ...}]: the
                   conformance matrix (target x level x world size) and each level's figures, whatever they are
         generate: "check": generate --check's summary: "problems" by kind; for miles and megatron-bridge
                   "megatron": {"model": the Megatron model's check: spec, layers, tp, ep, log-prob figures}
         any:      "levels": [{"level": str, "status": pass|fail|not run, "reason": str}, ...] in order, for a
                   stage that proves a target step by step; the cell shows the last level reached and why the next
                   one was not; "reason": why it is not a pass

The keys the dashboard draws are read through one validated model (Drawn): a report whose drawn keys do not fit it
is kept, shown as "malformed" with its file and the first field named, and never drawn from.

"""

from __future__ import annotations

import functools
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from dayone.core import vocabulary
from dayone.core.redact import redact_data
from dayone.core.vocabulary import Arch, Stage, Status
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

# Beside the targets, validate reports on dayone's own reference tiers (the "reference" row).
TARGETS = (*vocabulary.TARGETS, "reference")
# Stages that cannot run before the real weights exist (numerics need them); all others run on the spec and a
# synthetic checkpoint, which is what makes the dashboard green before release day.
NEEDS_WEIGHTS = frozenset({"validate"})

Target = vocabulary.Target | Literal["reference"]


TEXT = 4096  # the longest reason or name shown; a longer one is malformed (a page is read, not scrolled)


class _Open(BaseModel):
    """A drawn object: the keys named are checked, any others are kept and shown as they are (figures)."""

    model_config = ConfigDict(extra="allow")


class NumericsRow(_Open):
    capture: str = Field(max_length=200)
    layer: int
    rel_rms: float  # NaN or inf: a non-finite result, drawn at the top of the plot


class Tolerance(_Open):
    rel_rms: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class ResourceRow(_Open):
    kernel: str = Field(default="?", max_length=TEXT)
    arch: str | None = Field(default=None, max_length=64)
    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int | None = None
    config: str | None = Field(default=None, max_length=TEXT)


class LevelRow(_Open):
    level: str = Field(max_length=200)
    status: Status = "not run"
    reason: str | None = Field(default=None, max_length=TEXT)


class RunLevel(_Open):
    """One level of one conformance run; its figures (forward's logprob max abs, greedy agreement, tokens/s, ...)
    are the "figures" object conform writes, and any other key besides status and detail, shown with its name."""

    status: Status
    detail: str = Field(default="", max_length=TEXT)

    @property
    def figures(self) -> dict[str, Any]:
        extra = dict(self.model_extra or {})
        nested = extra.pop("figures", None)
        return {**extra, **nested} if isinstance(nested, dict) else extra


class ConformRun(_Open):
    world_size: int = Field(ge=1, le=1 << 20)
    framework: str | None = Field(default=None, max_length=200)
    version: str | None = Field(default=None, max_length=200)
    levels: dict[str, RunLevel]


class MegatronModelCheck(_Open):
    """generate --check's Megatron model check (dayone.programs.megatron.verify, for miles and megatron-bridge):
    where it ran (a tiny-scale spec, its layers, TP x EP) and the log-prob figures a trainer is judged on."""

    spec: str | None = Field(default=None, max_length=200)
    status: str | None = Field(default=None, max_length=200)
    layers: int | None = None
    world_size: int | None = None
    tp: int | None = None
    ep: int | None = None
    round_trip_tensors: int | None = None
    logprob_abs_diff_mean: float | None = None  # the Megatron model against dayone's reference tier (fp32)
    logprob_abs_diff_max: float | None = None
    megatron_train_rollout_logprob_abs_diff: float | None = None  # train/rollout parity, as Miles gates on it
    megatron_train_rollout_logprob_abs_diff_max: float | None = None
    megatron_train_rollout_kl: float | None = None
    megatron_bridge_import: str | None = Field(default=None, max_length=TEXT)


class MegatronCheck(_Open):
    model: MegatronModelCheck | None = None


class CheckSummary(_Open):
    """generate's static checks: problems by kind (byte_compile, ruff, api, ...), and the Megatron model's check."""

    problems: dict[str, list[str]] = Field(default_factory=dict)
    megatron: MegatronCheck | None = None


class Drawn(BaseModel):
    """What the dashboard reads of a report's details; everything else in details is shown as JSON only."""

    model_config = ConfigDict(extra="ignore")

    reason: str | None = Field(default=None, max_length=TEXT)
    levels: list[LevelRow] | None = None
    runs: list[ConformRun] | None = None
    numerics: list[NumericsRow] | None = None
    tolerance: Tolerance | None = None
    resources: list[ResourceRow] | None = None
    spec: dict[str, Any] | None = None
    stands_in_for: dict[str, Any] | None = None
    unreplayed: dict[str, Any] | None = None
    check: CheckSummary | None = None
    first_failure: dict[str, Any] | None = None

    def stated_reason(self) -> str | None:
        """Why the report is not a pass, in its own words: its reason, else its first check problem or failure."""
        if self.reason:
            return self.reason
        problems = [(kind, p) for kind, found in (self.check.problems if self.check else {}).items() for p in found]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return f"{problems[0][0]}: {problems[0][1]}{more}"
        if self.first_failure:
            return "first failure: " + ", ".join(f"{k} {v}" for k, v in self.first_failure.items())
        return None


SPEC_ONLY = ("spec", "stands_in_for")  # Drawn keys read from spec reports only


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: Stage
    spec: str = Field(min_length=1)
    target: Target | None = None
    arch: Arch | None = None
    status: Status
    created: datetime
    details: dict[str, Any] = Field(default_factory=dict)
    _source: str | None = PrivateAttr(default=None)  # the file it was read from, as given
    _drawn: Drawn | None = PrivateAttr(default=None)
    _malformed: str | None = PrivateAttr(default=None)

    @property
    def drawn(self) -> Drawn:
        """The details the dashboard draws, validated once; empty when they do not fit (see malformed)."""
        if self._drawn is None and self._malformed is None:
            try:
                # "spec" is the spec itself only in a spec report (a coverage report's is the spec's name)
                own = SPEC_ONLY if self.stage != "spec" else ()
                self._drawn = Drawn.model_validate({k: v for k, v in self.details.items() if k not in own})
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(p) for p in ("details", *first["loc"]))
                self._malformed = f"{self._source or 'a report'}: {where}: {first['msg']}"
        return self._drawn or Drawn()

    @property
    def malformed(self) -> str | None:
        """ "FILE: details.FIELD: what is wrong" when the drawn details do not fit, else None."""
        self.drawn  # noqa: B018 - validates once
        return self._malformed

    @field_validator("details")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Details quote servers and tools; a report written or read in a process holding a token never shows it.
        # They quote tracebacks too: this machine's folders are named, not spelled out (reports travel).
        return _local_folders_named(redact_data(value))


@functools.cache
def _local_folders() -> list[tuple[str, str]]:
    """(folder, its name in a report), longest first: the Python environment, dayone's own tree, the home folder."""
    import dayone

    folders = {
        str(Path(sys.prefix).resolve()): "<venv>",
        str(Path(dayone.__file__).resolve().parents[1]): "<dayone>",
        str(Path.home().resolve()): "~",
    }
    return sorted(((f, n) for f, n in folders.items() if f != "/"), key=lambda item: -len(item[0]))


def _local_folders_named(value: Any) -> Any:
    """Every string in JSON-like `value` with this machine's folders (_local_folders) replaced by their names."""
    if isinstance(value, str):
        for folder, name in _local_folders():
            value = value.replace(folder + "/", name + "/")
        return value
    if isinstance(value, dict):
        return {_local_folders_named(k): _local_folders_named(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_local_folders_named(v) for v in value)
    return value

    @field_validator("created")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        # Reports from different machines must order correctly: naive times are taken as UTC.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
