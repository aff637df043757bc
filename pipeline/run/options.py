"""What `integrate run` was asked to do, as one value: the command builds it from its options, and the run reads it.
Combinations that make no sense are refused here, once, with one line (InputError)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dayone.core.errors import InputError
from dayone.core.vocabulary import ARCHS, TARGETS

DEMO_SPEC, DEMO_SCALE, DEMO_SEED = "kimi-k3", "tiny", 0


@dataclass(frozen=True)
class Publish:
    """A GitHub release to make from the packages (the token comes from GITHUB_TOKEN, never from here)."""

    repo: str  # OWNER/NAME
    tag: str
    api_url: str | None = None  # GitHub Enterprise or a test server; None: api.github.com


@dataclass(frozen=True)
class RunOptions:
    out: Path
    checkpoint: str | None = None  # a folder or HF repo id; None with demo
    demo: bool = False  # synthesise a stand-in of `spec` (default DEMO_SPEC) at `scale` first
    spec: str | None = None  # NAME or FILE; None: derived from the checkpoint's config.json
    scale: str = DEMO_SCALE
    stand_in_for: str | None = None  # the checkpoint is a small stand-in of this spec: compile and plan at its widths
    targets: tuple[str, ...] = TARGETS
    archs: tuple[str, ...] = ARCHS
    gpu: str = "h200"
    gpus: int | None = None  # None: the smallest count of `gpu` that fits
    publish: Publish | None = None
    skip: frozenset[str] = frozenset()  # stages not to run (reported as not run, on request)

    def __post_init__(self) -> None:
        from dayone.spec.planner import GPUS

        if self.demo == bool(self.checkpoint):
            raise InputError("run: give a CHECKPOINT or --demo (not both)")
        if self.demo and self.stand_in_for:
            raise InputError("run: --stand-in-for names a CHECKPOINT's spec; --demo's stand-in is of --spec")
        if not self.demo and self.scale != DEMO_SCALE:
            raise InputError("run: --scale is --demo's (a CHECKPOINT has its own widths)")
        if self.gpu not in GPUS:
            raise InputError(f"run: --gpu {self.gpu}: not a GPU the plan knows ({', '.join(GPUS)})")

    @property
    def named_spec(self) -> str | None:
        """The spec the run names before it has a checkpoint: the demo's, or the one a stand-in stands in for."""
        return (self.spec or DEMO_SPEC) if self.demo else self.stand_in_for
