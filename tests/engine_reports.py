"""What a passing conformance report of an engine shows, checked the same way wherever the report comes from.

Two runs give the reports: the conform tests' own (tests/conform: Kimi Linear at tiny widths, its experts split over
both ranks by tensor parallelism at world size 2) and the README run's (tests/run/test_demo_conformance.py: the demo's
93-layer tiny K3, whose experts' one MXFP4 scale group per row cannot be halved, so world size 2 spreads them by
expert parallelism). Between them each engine runs both ways, and each engine start is paid once per session.
"""

from __future__ import annotations

from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common
from dayone.conform.results import Run, TargetReport

PROMPT_POSITIONS = 37  # every prompt token after the first and every generated one (dayone.conform.forward)
GREEDY_TOKENS = 14
FP32_LOGPROB = 1e-4  # the fp32_logprob row of the forward judge's table


def every_level_passes(report: TargetReport, framework: str) -> None:
    assert report.version == RELEASES[framework].version
    assert [run.world_size for run in report.runs] == [1, 2]
    for run in report.runs:
        for level, entry in run.levels.items():
            assert entry.status == "pass", f"{framework} ws{run.world_size} {level}: {entry.detail}"
    assert report.passed


def forward_within_fp32_bounds(run: Run) -> None:
    """The driver's own comparison with the reference tier: greedy tokens identical, every log-prob within the bound."""
    figures = run.levels["forward"].figures
    assert figures["float32.greedy_tokens"] == GREEDY_TOKENS and figures["float32.greedy_disagreement"] == 0
    assert figures["float32.positions"] == PROMPT_POSITIONS
    assert figures["float32.logprob_max_abs"] <= FP32_LOGPROB
    assert figures["float32.prefill_tokens_per_s"] > 0 and figures["float32.decode_tokens_per_s"] > 0


def bf16_judged_at_world_size_1_only(report: TargetReport) -> None:
    """bf16 is judged against the noise floor at world size 1; world size 2 runs fp32 only."""
    ws1, ws2 = report.runs
    figures = ws1.levels["forward"].figures
    assert "bfloat16.logprob_mean_abs" in figures and "bfloat16.logprob_mean_abs_floor" in figures
    assert not any(key.startswith("bfloat16.") for key in ws2.levels["forward"].figures)


def experts_spread_at_world_size_2(report: TargetReport, spread: bool) -> None:
    """Whole experts on each rank (expert parallelism) exactly where an expert row's scale group cannot be halved."""
    ws2 = report.runs[1]
    assert ("experts spread by expert parallelism" in ws2.levels["loaded"].detail) is spread
    assert ws2.levels["loaded"].status == ws2.levels["forward"].status == "pass"


def vllm_inspects_a_hybrid_mla_model(spec, report: TargetReport) -> None:
    ws1, ws2 = report.runs
    facts = ws1.facts
    package = common.package_name(spec, "vllm")
    assert facts["class"] == f"{package}.model.{spec.hf.architecture}"
    assert facts["is_hybrid"] is True and facts["use_mla"] is True and facts["runner"] == "generate"
    # vLLM's inspection of the plugin's class ran in the probe (engines/vllm_probe.py), not in the fresh interpreter
    # vLLM starts for it (12 s an engine start): the pinned release's private registry API still answers.
    assert facts["model_info"] == "inspected in the probe's process"
    # On vLLM's CPU platform the MXFP4 experts load through the adapter's own method (fp32 allowed, no kernel).
    assert facts["quantization"] == (f"{package}_cpu_mxfp4" if spec.quantization is not None else None)
    figures = ws1.levels["forward"].figures
    assert figures["float32.prefix_caching"].startswith("off: ")
    assert "vllm.LLM greedy generation" in ws1.levels["forward"].detail
    assert ws2.facts["expert_parallel"] is ("experts spread by expert parallelism" in ws2.levels["loaded"].detail)


def sglang_says_it_is_model_forward_without_the_scheduler(report: TargetReport) -> None:
    detail = report.runs[0].levels["forward"].detail
    assert detail.startswith("float32: SGLang model forward without its scheduler")
    assert "ModelRunner cannot start on a CPU" in detail and "sgl-kernel's CPU build is not published" in detail
    assert "vllm" not in detail.lower()
