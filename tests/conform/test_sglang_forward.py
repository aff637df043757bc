"""SGLang's forward level: the generated SGLang model class generating inside SGLang's parallel state (its peer
environment, .ci/setup.d/11-sglang.sh), fed scheduler-shaped ForwardBatch objects (extend, then decode) with SGLang's
torch-native attention backend and KV pools (pipeline/programs/engines/sglang_forward.py), judged by the conformance
driver against dayone's reference tier: fp32 greedy tokens identical and every log-prob within 1e-4, at world size 1
and 2 (gloo): Kimi Linear at tiny widths here (the SGLang probe batch's driven run), the README run's 93-layer K3 in
tests/run/test_demo_conformance.py. The layers SGLang has only as GPU kernels (KDA, MoE, MXFP4) run
through the generated package's CPU paths, which compute with dayone's references shipped in the package; a mistake
planted there is caught, with the first layer whose output differs named.

The level is labelled what it is: model forward without SGLang's scheduler, because SGLang's ModelRunner cannot start
on a CPU from the package index (sgl-kernel's CPU build is not published there).
"""

from __future__ import annotations

import importlib
import inspect

import engine_reports as check
import pytest
from conform_fixtures import plant, tiny
from dayone.adapters.targets import common, sglang
from dayone.conform import peers
from dayone.conform.driver import conform_target
from dayone.synth.write import write_synthetic
from test_sglang_probe import driven_report

pytestmark = pytest.mark.skipif(peers.peer_python("sglang") is None, reason=peers.missing("sglang"))


def prepare_sglang(root, spec):
    """(checkpoint folder, generated SGLang adapter folder) of `spec` under root."""
    checkpoint = root / "checkpoint"
    write_synthetic(spec, checkpoint, seed=0, num_shards=2)
    adapter = root / "generated" / "sglang"
    common.write_tree(adapter, sglang.files(spec))
    return checkpoint, adapter


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    """(spec, report) of Kimi Linear through the conformance driver at world sizes 1 and 2, forward in fp32: the
    SGLang probe batch's driven run (tests/conform/test_sglang_probe.py), one set of engine starts for both files."""
    return driven_report(tmp_path_factory)


def test_every_level_passes_at_world_size_1_and_2(driven):
    check.every_level_passes(driven[1], "sglang")


def test_forward_is_within_the_fp32_bounds_of_the_reference(driven):
    for run in driven[1].runs:
        check.forward_within_fp32_bounds(run)


def test_the_level_says_it_is_model_forward_without_the_scheduler_and_why(driven):
    check.sglang_says_it_is_model_forward_without_the_scheduler(driven[1])


def test_the_package_computes_gpu_only_layers_with_the_shipped_references():
    """One truth: the CPU paths import the references shipped verbatim, nothing re-derived in cpu.py."""
    files = sglang.files(tiny("kimi-k3"))
    package = common.package_name(tiny("kimi-k3"), "sglang")
    cpu = files[f"{package}/cpu.py"]
    for module in ("kda_reference", "short_conv_reference", "gated_rmsnorm_reference", "routing", "mxfp4"):
        assert f"from .{module} import" in cpu
    for name, module in {**common.CPU_REFERENCES["kda"], **common.CPU_REFERENCES["moe"]}.items():
        assert inspect.getsource(importlib.import_module(module)) in files[f"{package}/{name}"], name
    model = files[f"{package}/model.py"]
    assert "ON_CPU = not (is_cuda_alike() or is_npu() or is_xpu())" in model


def test_a_cpu_path_mistake_is_caught_with_the_layer_named(tmp_path):
    """The routed experts' weights dropped in the package's CPU MoE path: forward fails at fp32, and the first
    layer whose output differs is the first MoE layer."""
    spec = tiny("kimi-k3")
    checkpoint, adapter = prepare_sglang(tmp_path, spec)
    plant(adapter, "cpu.py", "y * weights[rows, slots, None]", "y")
    (run,) = conform_target("sglang", adapter, checkpoint, spec, (1,), forward_dtypes=("float32",)).runs
    forward = run.levels["forward"]
    assert run.levels["loaded"].status == "pass"
    assert forward.status == "fail", forward.detail
    first_moe = spec.ffn_kinds.index("moe")
    assert forward.figures["float32.first_differing_layer"].startswith(f"layers.{first_moe} ")
    assert f"first layer that differs: layers.{first_moe} " in forward.detail


def test_world_size_2_splits_the_experts_over_both_ranks(driven):
    """Kimi Linear's experts, widened to two scale groups' width, split over both ranks by tensor parallelism (the
    README run's K3, whose experts cannot be halved, spreads them: tests/run/test_demo_conformance.py)."""
    spec, report = driven
    assert spec.moe.expert_intermediate_size % 2 == 0
    check.experts_spread_at_world_size_2(report, spread=False)
