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
    # the shipped adapter and its planted copies read one checkpoint: one reference tier's runs for their forwards
    references = References(open_local(checkpoint), spec)
    cases = {"shipped": Case(adapter, checkpoint, spec, (1, 2), references=references)}
    for name, (file, old, new, count, world, dtypes) in PLANTED_VLLM.items():
        copy = root / name / "vllm"
        shutil.copytree(adapter, copy)
        plant(copy, file, old, new, count)
        cases[name] = Case(copy, checkpoint, spec, (world,), forward_dtypes=dtypes, references=references)
    for name, updates in (("honoured-together", honoured_together()), ("new-model-type", NEW_MODEL_TYPE)):
        variant = k3_variant(updates)
        variant_checkpoint, variant_adapter = prepare(root / name, variant)
        cases[name] = Case(variant_adapter, variant_checkpoint, variant, (1,), forward_dtypes=("float32",))
    reports = conform_targets("vllm", list(cases.values()))
    return {name: Conformed(case.spec, case.checkpoint, case.adapter, report)
            for (name, case), report in zip(cases.items(), reports, strict=True)}  # fmt: skip


@pytest.fixture(scope="session")
def shipped(vllm_batch) -> Conformed:
    """(spec, checkpoint, adapter, vLLM conform report at world size 1 and 2) of SPEC at tiny widths."""
    return vllm_batch["shipped"]
