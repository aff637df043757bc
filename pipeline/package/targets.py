"""What each target's package declares about its framework.

The framework is an extra pinned to the release(s) `integrate generate --check` checked the code against
(dayone.adapters.pins), not a plain requirement: people install an adapter into an environment that already has
its SGLang / vLLM / Megatron (often a CUDA-specific build or a container image), and a hard requirement would let
pip replace it. `pip install "<package>[<extra>]"` brings the checked release. The plain requirements are the
generated pyproject's `project.dependencies` (discover.Adapter.requirements): torch, unpinned for the same reason,
and for Miles and Megatron-Bridge what the copied Megatron model imports (Triton, pydantic).
"""

from __future__ import annotations

from dataclasses import dataclass

from dayone.adapters.pins import RELEASES, TARGET_RELEASES
from dayone.core.vocabulary import TARGET_TITLES


@dataclass(frozen=True)
class Framework:
    extra: str  # optional-dependency name: the first release's distribution name
    requirements: tuple[str, ...]  # "name==version" for each release the static check used
    checked: str  # "sglang 0.5.23", for people

    def as_dict(self) -> dict:
        return {"extra": self.extra, "requirements": list(self.requirements), "checked": self.checked}


# How the README and model card name each target.
TITLES = TARGET_TITLES


def framework(target: str) -> Framework:
    releases = [RELEASES[name] for name in TARGET_RELEASES[target]]
    return Framework(
        extra=releases[0].name,
        requirements=tuple(f"{r.name}=={r.version}" for r in releases),
        checked=", ".join(f"{r.name} {r.version}" for r in releases),
    )
