"""What each stage of `integrate run` hands the stages after it: one typed value per stage, passed in memory.

A later stage reads an earlier one's files only through the paths its value names (the adapters generate wrote, the
targets conform held back, the dist package built), never by globbing a folder. The value is also what stage.json
records, with its paths relative to the stage's folder, so a reused stage hands on exactly what a fresh one would.

A recorded value is read back as untrusted (stage.json sits in the user's OUT): wrong types, a path that leaves the
stage's folder or names a file that is gone make it unusable, and the stage is built again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class UnusableOutput(ValueError):
    """A recorded stage output that cannot be handed on; the stage runs again."""


class StageOutput(BaseModel):
    """A stage's result for the stages after it. `reports`: the dashboard reports it wrote. Every Path field (alone,
    in a tuple or as a dict's values) names a file or folder inside the stage's own folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reports: tuple[Path, ...] = ()

    def record(self, folder: Path) -> dict:
        """JSON-able, with every path relative to `folder` (the stage's folder while it is built)."""
        return self._rebased(lambda p: p.relative_to(folder)).model_dump(mode="json")

    @classmethod
    def load(cls, data: Any, folder: Path) -> Self:
        """The value a record describes, its paths under `folder`; UnusableOutput when it cannot be used."""
        try:
            relative = cls.model_validate(data)
        except ValidationError as err:
            raise UnusableOutput(f"not a {cls.__name__}: {err.errors()[0]['msg']}") from None
        root = folder.resolve()

        def inside(path: Path) -> Path:
            full = folder / path
            if path.is_absolute() or not full.resolve().is_relative_to(root):
                raise UnusableOutput(f"{path}: outside the stage's folder")
            if not full.exists():
                raise UnusableOutput(f"{path}: no longer there")
            return full

        return relative._rebased(inside)

    def _rebased(self, move) -> Self:
        return self.model_copy(update={name: _paths(getattr(self, name), move) for name in type(self).model_fields})


def _paths(value: Any, move) -> Any:
    if isinstance(value, Path):
        return move(value)
    if isinstance(value, tuple):
        return tuple(_paths(v, move) for v in value)
    if isinstance(value, dict):
        return {k: _paths(v, move) for k, v in value.items()}
    return value


class SynthOutput(StageOutput):
    checkpoint: Path  # the stand-in checkpoint's folder


class SpecOutput(StageOutput):
    spec_file: Path  # the run's spec, as YAML


class CoverageOutput(StageOutput):
    ok: bool
    tensors: int
    missing: int
    inspect: Path  # inspect.json: the coverage in full


class PlanOutput(StageOutput):
    fits: bool
    plan: Path  # plan.json


class GenerateOutput(StageOutput):
    adapters: dict[str, Path]  # target -> its generated package tree
    failed: tuple[str, ...] = ()  # targets whose generated code failed its checks


class ConformOutput(StageOutput):
    runs: dict[str, Path]  # engine target -> conform-<target>.json, its levels at each world size
    held: dict[str, str] = {}  # engine targets whose conformance failed a level that ran -> why: not shipped


class CompileOutput(StageOutput):
    resources: Path | None = None  # resources.json: every kernel build's registers and shared memory
    cubins: Path | None = None  # the folder of cubins; both None when a build failed


class ValidateOutput(StageOutput):
    report: Path  # report-validate.json: the numerics verdict


class PackageOutput(StageOutput):
    dist: Path | None = None  # wheels, sdists, model card, SHA256SUMS; None when nothing was packaged


class PublishOutput(StageOutput):
    release: str | None = None  # the release's URL
    assets: int = 0
