"""The fast tier's `kernels` switch on a small K3-shaped model (KDA, MLA, MXFP4 latent MoE, attention residuals with
snapshots at 0, 2 and 4): kernels="triton" (the Triton interpreter, in a subprocess) and kernels="torch" each match
the reference tier with its routing replayed, their prefill + decode matches their own full forward, they agree with
each other, and the model reports which backend ran every op."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from dayone.adapters.model import Capture, SpecModel, WeightLoader
from dayone.core.errors import InputError
from dayone.core.numerics import assert_close
from kernels_run import EXTRA, prompts, run
from model_fixtures import kernels_k3_spec, random_checkpoint

HERE = Path(__file__).parent
OPS = {"act_and_mul", "attn_res_aggregate", "chunk_kda", "dequantize_mxfp4", "gated_rmsnorm", "kda_decode",
       "mla_decode", "moe_combine", "mxfp4_linear", "short_conv", "short_conv_update"}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The reference tier's logits and routes, and what the fast tier gives with kernels="torch" and "triton"."""
    spec = kernels_k3_spec()
    ref = SpecModel(spec, "reference")
    WeightLoader(spec, random_checkpoint(spec, seed=4).__getitem__).load(ref)
    ids, lengths, _ = prompts()
    routes = Capture("*.topk_ids")
    expected = ref(ids, lengths, capture=routes)
    tmp = tmp_path_factory.mktemp("kernels")
    torch.save({"routes": dict(routes)}, tmp / "in.pt")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    subprocess.run([sys.executable, str(HERE / "kernels_run.py"), "triton", str(tmp / "in.pt"), str(tmp / "out.pt")],
                   check=True, env=env, timeout=300)  # fmt: skip
    return {"reference": expected, "torch": run("torch", dict(routes)), "triton": torch.load(tmp / "out.pt")}


@pytest.mark.parametrize("kernels", ["torch", "triton"])
def test_fast_tier_matches_reference(runs, kernels):
    assert_close(runs[kernels]["replayed"], runs["reference"], "bf16_model", f"kernels={kernels} logits")


@pytest.mark.parametrize("kernels", ["torch", "triton"])
def test_prefill_then_decode_equals_full_forward(runs, kernels):
    out = runs[kernels]
    _, lengths, _ = prompts()
    for b, n in enumerate(lengths):
        assert_close(out["prefill"][b, :n], out["full"][b][:n], "bf16_model", f"{kernels}: prefill of request {b}")
        for t in range(EXTRA):
            assert_close(out["decode"][t, b], out["full"][b][n + t], "bf16_model", f"{kernels}: decode {t} of {b}")


def test_triton_and_torch_agree(runs):
    assert_close(runs["triton"]["replayed"], runs["torch"]["replayed"], "bf16_model", "triton vs torch logits")
    assert_close(runs["triton"]["decode"], runs["torch"]["decode"], "bf16_model", "triton vs torch decode")


@pytest.mark.parametrize("kernels", ["torch", "triton"])
def test_backends_report_every_op(runs, kernels):
    assert runs[kernels]["backends"] == dict.fromkeys(sorted(OPS), kernels)


def test_switch_defaults_and_checks():
    spec = kernels_k3_spec()
    assert SpecModel(spec, "fast", device="meta").tier.kernels == "auto"
    assert SpecModel(spec, "reference", device="meta").backends() == {}
    with pytest.raises(InputError):
        SpecModel(spec, "fast", device="meta", kernels="cuda")
