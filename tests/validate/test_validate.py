"""integrate validate end to end: the synthetic K3 stack green, transformers' kimi_linear as the oracle, the report's
pointer to the first break, the reload check, golden files."""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import integrate
from dayone.validate import Options
from validate_fixtures import ONE_THREAD, validated


def _e2e(report: dict, capture: str) -> dict:
    return next(r for r in report["details"]["end_to_end"] if r["capture"] == capture)


def test_tiny_k3_validates_green_end_to_end(k3_tiny, tmp_path):
    """All 93 layers (8 snapshots), the fast tier against the reference tier, through the CLI, with the reload check;
    the JSON report is a dashboard validate report."""
    out = tmp_path / "report.json"
    result = integrate("validate", k3_tiny, "--tokens", "3,14,15,92,65,35,89,79,32,38,46,26,43,38", "--report", out,
                       env=ONE_THREAD)  # fmt: skip
    assert result.code == 0, result.out + result.err
    assert "pass" in result.out
    report = json.loads(out.read_text())
    d = report["details"]
    assert report["stage"] == "validate" and report["status"] == "pass" and report["target"] == "reference"
    assert d["reference"] == "naive" and d["candidate"] == "fast" and d["routing"] == "replayed"
    kernels = d["backend"]["kernels"]
    assert d["backend"]["device"] == "cpu" and set(kernels.values()) == {"torch"}
    # every op the fast tier routes through a kernel function ran, and is named
    assert {"chunk_kda", "short_conv", "gated_rmsnorm", "attn_res_aggregate", "act_and_mul"} <= set(kernels)
    assert d["first_failure"] is None
    layers = {r["layer"] for r in d["numerics"]}
    assert layers == set(range(-1, 94))
    captures = {r["capture"] for r in d["numerics"]}
    assert {"embed", "attn_res", "attn_out", "mlp_res", "router_logits", "latent_down", "latent_combined",
            "latent_normed", "latent_up", "out", "output_res", "final_norm", "logits"} <= captures  # fmt: skip
    assert len(d["router"]) == 92 and all(r["passed"] for r in d["router"])
    assert d["reload"]["checked"] and d["reload"]["identical"] and d["reload"]["parts"] == 95
    assert all(e["noise_changed_output"] for e in d["reload"]["entries"])
    lp = d["logprobs"]
    assert lp["passed"] and lp["positions"] == 13 and 0 < lp["mean_abs"] < 0.05
    assert _e2e(report, "logits")["judged"] and _e2e(report, "logits")["passed"]


def test_reference_tier_against_transformers(kimi_linear_dir):
    """transformers' KimiLinearForCausalLM (fp32, eval) on the checkpoint it wrote: the reference tier within 1e-4
    max-abs at every capture point it exposes, judged by the fp32_oracle row."""
    report = validated(kimi_linear_dir, Options(reference="auto", candidate="reference", tokens="5,9,2,77,31,8,60,4",
                                                    reload_check=False))  # fmt: skip
    d = report["details"]
    assert d["reference"] == "transformers" and d["comparison"] == "fp32_oracle"
    assert report["status"] == "pass", d["first_failure"]
    assert {"embed", "attn_out", "mlp_out", "out", "router_logits", "final_norm", "logits"} <= {
        r["capture"] for r in d["numerics"]
    }
    assert max(r["max_abs"] for r in d["numerics"]) <= 1e-4
    assert _e2e(report, "logits")["max_abs"] <= 1e-4


def test_fast_tier_against_transformers(kimi_linear_dir):
    report = validated(kimi_linear_dir, Options(reference="transformers", tokens="5,9,2,77,31,8,60,4,13,1"))
    d = report["details"]
    assert report["status"] == "pass", d["first_failure"]
    assert d["comparison"] == "bf16" and d["reload"]["identical"]
    assert all(r["tolerance"] == "bf16_model" for r in d["numerics"])


def test_first_break_is_named(k3_13, monkeypatch):
    """A fast-tier MLA that is 2% off: the report points at the first MLA layer's attention output."""
    from dayone.adapters.model.mla import MLA

    absorbed = MLA._absorbed
    monkeypatch.setattr(MLA, "_absorbed", lambda self, q, keys, past: absorbed(self, q, keys, past) * 1.1)
    report = validated(k3_13, Options(reference="naive", tokens="4,8,15,16,23,42", reload_check=False))
    first = report["details"]["first_failure"]
    assert report["status"] == "fail"
    assert (first["layer"], first["capture"], first["tolerance"]) == (3, "attn_out", "bf16_model")
    assert "rel_rms" in first["metric"]


def test_reload_check_catches_a_stale_derived_tensor(k3_13, monkeypatch):
    """A loader that forgets to rebuild derived tensors (the K3 bring-up bug): the reload check fails."""
    from dayone.adapters.model import WeightLoader

    def load_layer(self, model, i):
        layer = model.layers[i]
        self._materialise(layer)
        self._fill(model, self.by_layer[i])
        if not hasattr(layer, "_loaded_once"):  # derived tensors built on the first load only
            layer.refresh_derived()
            layer._loaded_once = True

    monkeypatch.setattr(WeightLoader, "load_layer", load_layer)
    monkeypatch.setattr("dayone.validate.streamed.StreamedModel._free", staticmethod(lambda part: None))
    report = validated(k3_13, Options(reference="naive", tokens="4,8,15,16,23,42"))
    d = report["details"]
    assert report["status"] == "fail" and not d["reload"]["identical"]
    assert d["first_failure"]["capture"] == "reload" and d["first_failure"]["layer"] == "layers.0"


def test_golden_round_trip(k3_13, k3_13_other_seed, tmp_path, tokens_file):
    golden = tmp_path / "golden.safetensors"
    result = integrate("golden", k3_13, "--tokens", tokens_file, "-o", golden, env=ONE_THREAD)
    assert result.code == 0, result.err
    from safetensors import safe_open

    with safe_open(str(golden), "pt") as f:
        meta = f.metadata()
        ids, logits = f.get_tensor("input_ids"), f.get_tensor("logits")
        assert ids.dtype == torch.int64 and list(ids.shape) == [2, 12]
        assert logits.dtype == torch.float32 and list(logits.shape) == [2, 12, 256]
        assert torch.allclose(f.get_tensor("logprobs"), torch.log_softmax(logits, -1))
        assert "routes.layers.1.topk_ids" in list(f.keys())
    # the spec is named after the model (kimi_k3 and its size), not the folder (kimi-k3-13)
    assert meta["tier"] == "reference" and meta["spec"].startswith("kimi-k3-") and meta["dayone_version"]
    assert meta["spec"] != k3_13.name
    same = validated(k3_13, Options(reference=f"golden:{golden}", candidate="reference", reload_check=False))
    assert same["status"] == "pass" and _e2e(same, "logits")["max_abs"] == 0.0
    fast = validated(k3_13, Options(reference=f"golden:{golden}"))
    assert fast["status"] == "pass", fast["details"]["first_failure"]
    assert fast["details"]["comparison"] == "bf16" and fast["details"]["tokens"]["length"] == 12
    other = integrate("validate", k3_13_other_seed, "--reference", f"golden:{golden}", "--no-reload-check",
                      env=ONE_THREAD)  # fmt: skip
    assert other.code == 1 and "first break at layer 13, logits (end to end)" in " ".join(other.out.split())


@pytest.mark.parametrize("candidate", ["fast", "reference"])
def test_synthetic_kimi_linear_against_transformers(tmp_path, candidate):
    """`integrate synth` writes Kimi Linear checkpoints transformers loads; both tiers validate against it."""
    from validate_fixtures import synthetic

    path = synthetic(tmp_path / "kl", "kimi-linear-48b-a3b")
    report = validated(path, Options(candidate=candidate, tokens="1,2,3,250,7,7,9", reload_check=False))
    assert report["details"]["reference"] == "transformers"
    assert report["status"] == "pass", report["details"]["first_failure"]
