"""Which reference validate takes for a kimi_linear checkpoint: transformers only where its kimi_linear implements
the whole spec; a feature it lacks (a softmax router, MLA with RoPE, a KDA gate rank other than the head dim) sends
`--reference auto` to the naive reference with one line saying why, and makes `--reference transformers` bad input.

The checkpoints are tiny synthetic Kimi Linear variants (4 layers: KDA, MLA, a dense and MoE layers), written once
per session; the spec is derived from their config.json, as `integrate validate` does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from cli_runner import assert_bad_input, integrate
from dayone.core.errors import InputError
from dayone.spec.registry import load_spec
from dayone.synth import scaled_spec, write_synthetic
from dayone.validate.references import resolve_reference
from validate_fixtures import ONE_THREAD, source_of, validated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

from model_fixtures import with_updates

BASE = scaled_spec(load_spec("kimi-linear-48b-a3b"), "tiny", 4)  # [kda kda kda mla], [dense] + 3 x [moe]

# variant -> (spec updates, the phrase the one line must carry)
UNSUPPORTED = {
    "softmax-router": ({"moe": {"router": {"activation": "softmax"}}}, "has no softmax router"),
    "mla-rope": ({"mla": {"nope": False, "rope": {"theta": 10000.0}}}, "has no MLA with RoPE"),
    "kda-gate-rank": (
        {"kda": {"gate": {"rank": BASE.kda.head_dim // 2}}},
        f"has no KDA gate rank {BASE.kda.head_dim // 2}, only head_dim {BASE.kda.head_dim}",
    ),
}


@pytest.fixture(scope="session")
def variants(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reference-choice")
    paths = {}
    for name, updates in [("supported", {}), *((n, u) for n, (u, _) in UNSUPPORTED.items())]:
        paths[name] = root / name
        write_synthetic(with_updates(BASE, updates), paths[name], seed=0)
    return paths


def test_supported_spec_is_judged_by_transformers(variants):
    source = source_of(variants["supported"])
    assert source.checkpoint.config["model_type"] == "kimi_linear"
    assert resolve_reference("auto", source).kind == "transformers"
    assert source.reference_note is None
    assert resolve_reference("transformers", source).kind == "transformers"


@pytest.mark.parametrize("asked", ["auto", "transformers"])
def test_transformers_loads_the_checkpoint_once(variants, monkeypatch, asked):
    """auto reads transformers' loading info by loading the model; the reference it then takes is that model, not
    a second load (minutes for a real checkpoint). An explicit --reference transformers loads it once too."""
    from dayone.validate import Options, references

    loads = []
    load = references._load_transformers

    def counted(root):
        loads.append(root)
        return load(root)

    monkeypatch.setattr(references, "_load_transformers", counted)
    report = validated(variants["supported"], Options(reference=asked, tokens="1,2,3,4", reload_check=False))
    assert report["details"]["reference"] == "transformers"
    assert report["details"]["reference_reason"] is None
    assert loads == [variants["supported"]]


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_unsupported_feature_switches_to_naive(variants, name, capsys):
    source = source_of(variants[name])
    assert source.checkpoint.config["model_type"] == "kimi_linear"
    assert resolve_reference("auto", source).kind == "naive"
    expected = f"transformers' kimi_linear {UNSUPPORTED[name][1]}: judged against the naive reference"
    assert source.reference_note == expected
    assert capsys.readouterr().err.strip() == expected  # one line on stderr, not wrapped


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_explicit_transformers_on_unsupported_spec_is_refused(variants, name):
    with pytest.raises(InputError, match="use --reference naive") as err:
        resolve_reference("transformers", source_of(variants[name]))
    assert UNSUPPORTED[name][1] in str(err.value)


def test_cli_says_why_and_refuses(variants, tmp_path):
    """Through `integrate validate`: auto on a softmax router runs against naive and says so in one line; asking
    for transformers on it is one line on stderr and exit code 2, with no report written."""
    root, phrase = variants["softmax-router"], UNSUPPORTED["softmax-router"][1]
    report = tmp_path / "report.json"
    refused = integrate(
        "validate", root, "--tokens", "1,2,3,4", "--report", report, "--reference", "transformers", env=ONE_THREAD
    )
    assert_bad_input(refused, phrase, "use --reference naive")
    assert not report.exists()

    result = integrate("validate", root, "--tokens", "1,2,3,4", "--report", report, env=ONE_THREAD)
    assert result.code == 0, result.err
    line = f"transformers' kimi_linear {phrase}: judged against the naive reference"
    assert line in result.err.splitlines()  # a warning: stderr, like every warning
    details = json.loads(report.read_text())["details"]
    assert details["reference"] == "naive" and details["reference_reason"] == line


def test_transformers_refuses_a_checkpoint_it_does_not_read_whole(tmp_path):
    """The net under transformers_gap: a checkpoint tensor transformers' model does not read (an MLA output gate,
    which from_pretrained loads past with a note) is refused in one line, judged by transformers' own loading info,
    never a reference that silently dropped it."""
    from dayone.validate.references import run_transformers

    root = tmp_path / "mla-output-gate"
    write_synthetic(with_updates(BASE, {"mla": {"output_gate": True}}), root, seed=0)
    with pytest.raises(InputError, match="does not read these checkpoint tensors") as err:
        run_transformers(root, torch.tensor([[1, 2, 3, 4]]))
    assert "self_attn.g_proj.weight" in str(err.value) and "\n" not in str(err.value)


def test_the_report_says_why_naive_whatever_decided(variants, tmp_path, monkeypatch):
    """reference_reason is set wherever auto does not take transformers: a model type transformers lacks (K3), and
    transformers not installed; not where it takes transformers (test_supported_spec_is_judged_by_transformers)."""
    k3 = tmp_path / "k3"
    write_synthetic(scaled_spec(load_spec("kimi-k3"), "tiny", 4), k3, seed=0)
    source = source_of(k3)
    assert resolve_reference("auto", source).kind == "naive"
    assert (
        source.reference_note == "transformers implements no model_type 'kimi_k3': judged against the naive reference"
    )

    from dayone.validate import references

    monkeypatch.setattr(references, "transformers_available", lambda: False)
    source = source_of(variants["supported"])
    assert resolve_reference("auto", source).kind == "naive"
    assert source.reference_note == "transformers is not installed: judged against the naive reference"


def test_transformers_takes_a_checkpoint_without_shared_experts_or_correction_bias(tmp_path):
    """Weights transformers builds that the checkpoint has no tensor for are not refused where they are as absent
    as in the checkpoint: 0-wide shared experts, the router correction bias it zeroes (the drill's kl-router)."""
    from dayone.validate.references import run_transformers, transformers_gap

    updates = {"moe": {"num_shared_experts": 0, "shared_intermediate_size": 0, "router": {"correction_bias": False}}}
    spec = with_updates(BASE, updates)
    assert transformers_gap(spec) is None
    write_synthetic(spec, tmp_path / "bare-router", seed=0)
    caps = run_transformers(tmp_path / "bare-router", torch.tensor([[1, 2, 3, 4]]))
    assert caps["logits"].shape == (4, spec.vocab_size) and torch.isfinite(caps["logits"]).all()


def test_transformers_reference_leaves_the_environment_alone(variants, monkeypatch):
    """The library does not set USE_HUB_KERNELS for itself: the commands that validate choose transformers' torch
    path at their entry (tests/run/test_stage_calls.py). (torch itself may set its own cache variables on import.)"""
    import os

    from dayone.validate.references import run_transformers

    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    caps = run_transformers(variants["supported"], torch.tensor([[1, 2, 3, 4]]))
    assert torch.isfinite(caps["logits"]).all()
    assert "USE_HUB_KERNELS" not in os.environ
