"""The README run's conformance, read from its files: the demo's 93-layer tiny K3 in SGLang and vLLM at world sizes 1
and 2, forward in fp32 (and bf16 at world size 1) against dayone's reference tier. Its experts' one MXFP4 scale group
per row cannot be halved, so world size 2 spreads them whole over the ranks by expert parallelism, in both engines.

The run's engine starts are the ones these checks read (tests/engine_reports.py holds them, shared with the conform
tests' Kimi Linear, whose experts split by tensor parallelism): no second run of the same model in the same engines.
"""

from __future__ import annotations

import engine_reports as check
import pytest
from dayone.conform.results import TargetReport
from dayone.spec.registry import load_spec


@pytest.fixture(scope="module")
def conformed(readme_demo):
    """(the run's spec, {target: its conform report}), as the conform stage wrote them."""
    assert readme_demo.code == 0, readme_demo.stdout[-2000:] + readme_demo.stderr[-2000:]
    stages = readme_demo.out / "stages"
    spec = load_spec(str(stages / "spec" / "spec.yaml"))
    reports = {target: TargetReport.model_validate_json((stages / "conform" / f"conform-{target}.json").read_text())
               for target in ("sglang", "vllm")}  # fmt: skip
    return spec, reports


@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_every_level_passes_at_world_size_1_and_2(conformed, target):
    check.every_level_passes(conformed[1][target], target)


@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_forward_within_the_fp32_bounds_and_bf16_at_world_size_1(conformed, target):
    report = conformed[1][target]
    for run in report.runs:
        check.forward_within_fp32_bounds(run)
    check.bf16_judged_at_world_size_1_only(report)


@pytest.mark.parametrize("target", ["sglang", "vllm"])
def test_world_size_2_spreads_the_experts_whole(conformed, target):
    spec, reports = conformed
    assert spec.num_layers == 93 and spec.moe.expert_intermediate_size == spec.quantization.group_size
    check.experts_spread_at_world_size_2(reports[target], spread=True)


def test_vllm_inspects_the_model_as_hybrid_mla_with_the_checkpoint_quantization(conformed):
    spec, reports = conformed
    check.vllm_inspects_a_hybrid_mla_model(spec, reports["vllm"])
    assert reports["vllm"].runs[1].facts["expert_parallel"] is True


def test_sglang_says_it_is_model_forward_without_the_scheduler(conformed):
    check.sglang_says_it_is_model_forward_without_the_scheduler(conformed[1]["sglang"])
