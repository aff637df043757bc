"""Session fixtures: the conform tests' vLLM runs, made by one vLLM process on first use and shared by every test
that reads them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
from conform_fixtures import NEW_MODEL_TYPE, PLANTED_VLLM, honoured_together, k3_variant, plant, prepare, tiny
from dayone.conform.results import TargetReport
from dayone.spec.schema import ModelSpec

# The conform tests' own engine runs are of Kimi Linear, its experts widened so that world size 2 splits each over
# both ranks; the README run's K3 (tests/run/test_demo_conformance.py) is the one whose experts are spread whole.
SPEC = "kimi-linear-48b-a3b"


class Conformed(NamedTuple):
    spec: ModelSpec
    checkpoint: Path
    adapter: Path
    report: TargetReport


@pytest.fixture(scope="session")
def vllm_batch(tmp_path_factory) -> dict[str, Conformed]:
    """Every vLLM conformance the conform tests read, in one vLLM process (dayone.conform.driver.conform_targets:
    vLLM imported once, each job forked from it, about 9 s of one core saved per run):
    - "shipped": SPEC at tiny widths, world sizes 1 and 2, the forward in fp32 and bf16 (fp32 at 2);
    - each of conform_fixtures.PLANTED_VLLM: a copy of that adapter with one edit, on the same checkpoint;
    - "honoured-together" and "new-model-type": variants of the tiny K3 at world size 1, the forward in fp32.
    The faithful K3 (test_vllm_faithful.py) runs apart: its 2 GB checkpoint and probe-only run."""
    from dayone.checkpoint.reader import open_local
    from dayone.conform.driver import Case, conform_targets
    from dayone.conform.forward import References

    root = tmp_path_factory.mktemp("vllm-batch")
    spec = tiny(SPEC)
    checkpoint, adapter = prepare(root / "shipped", spec)
    cases = {"shipped": (spec, checkpoint, adapter, (1, 2), ("float32", "bfloat16"))}
    for name, (file, old, new, count, world, dtypes) in PLANTED_VLLM.items():
        copy = root / name / "vllm"
        shutil.copytree(adapter, copy)
        plant(copy, file, old, new, count)
        cases[name] = (spec, checkpoint, copy, (world,), dtypes)
    for name, updates in (("honoured-together", honoured_together()), ("new-model-type", NEW_MODEL_TYPE)):
        variant = k3_variant(updates)
        variant_checkpoint, variant_adapter = prepare(root / name, variant)
        cases[name] = (variant, variant_checkpoint, variant_adapter, (1,), ("float32",))
    # the shipped adapter and its planted copies read one checkpoint: one reference tier's runs for their forwards
    references = {checkpoint: References(open_local(checkpoint), spec)}
    reports = conform_targets("vllm", [Case(a, c, s, worlds, forward_dtypes=dtypes, references=references.get(c))
                                       for s, c, a, worlds, dtypes in cases.values()])  # fmt: skip
    return {name: Conformed(s, c, a, report)
            for (name, (s, c, a, _, _)), report in zip(cases.items(), reports, strict=True)}  # fmt: skip


@pytest.fixture(scope="session")
def shipped(vllm_batch) -> Conformed:
    """(spec, checkpoint, adapter, vLLM conform report at world size 1 and 2) of SPEC at tiny widths."""
    return vllm_batch["shipped"]
