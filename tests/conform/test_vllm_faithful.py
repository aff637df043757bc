"""vLLM takes the faithful K3 stand-in (dayone.synth.faithful: K3's own per-head and per-expert widths, 4 layers)
through "loaded" at world size 1: discovered, accepted by ModelConfig, built at those widths and loaded bitwise equal
to dayone's reference reading. Nothing computes with the weights, so they are patterned, not drawn
(conform_fixtures.patterned_checkpoint: 52 CPU-s for the module instead of 86).

The faithful hidden size 896 once made vLLM refuse the stand-in at "accepted" (transformers' RoPE check on
hidden // heads = 9, odd). The forward level is left out here, on purpose: a forward needs drawn weights (synth's
half minute), two more engine starts (fp32, bf16) and the reference tier at these widths, for arithmetic
tests/conform/test_vllm_conformance.py already judges at the tiny scale; benchmarks/engine_cpu.py --scale faithful
runs the engine's generation at this scale.
"""

from __future__ import annotations

import pytest
from conform_fixtures import prepare
from dayone.conform import peers
from dayone.conform.driver import conform_target
from dayone.spec.registry import load_spec
from dayone.synth.scale import scaled_spec

THROUGH_LOADED = ("discovered", "accepted", "built", "loaded")


@pytest.fixture(scope="module")
def faithful_report(tmp_path_factory, monkeypatch_module):
    spec = scaled_spec(load_spec("kimi-k3"), "faithful")
    checkpoint, adapter = prepare(tmp_path_factory.mktemp("k3-faithful"), spec, load_only=True)
    # No forward script: the driver stops after "loaded" and keeps the probe's own "not run" for forward.
    monkeypatch_module.setattr(peers, "forward_script", lambda target: None)
    return spec, conform_target("vllm", adapter, checkpoint, spec, (1,))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_vllm_loads_the_faithful_k3_at_world_size_1(faithful_report):
    spec, report = faithful_report
    (run,) = report.runs
    for level in THROUGH_LOADED:
        assert run.levels[level].status == "pass", f"{level}: {run.levels[level].detail}"
    assert run.levels["forward"].status == "not run"
    assert run.facts["use_mla"] is True and run.facts["is_hybrid"] is True
    # the widths that once tripped transformers' RoPE check (tests/synth/test_faithful.py holds the rule)
    assert (spec.hidden_size, spec.mla.num_heads, spec.moe.num_experts) == (1792, 96, 17)
