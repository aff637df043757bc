"""Miles end to end on the tiny K3 stand-in: Miles' own weight-sync converter entry (`convert_to_hf` from the pinned
commit's files, the generated package's dispatch patch applied with `git apply`) gives the checkpoint's names and
bytes from the Megatron model's parameters, and Miles' train_rollout_logprob_abs_diff between that model and vLLM's
rollout of the same checkpoint is at fp32 rounding.

The metric as Miles computes it (radixark/miles@c7969ad1f, losses.py and cp_utils.py): per sample, the mean over
its response tokens of |log p_train - log p_rollout|, averaged over samples (`dayone.adapters.rl.rl_metrics`). Miles
has no K3-specific gate on it at that commit; its CI's log-prob checker (--ci-test, log_utils.py) requires the mean
training and rollout log-probs within 0.03. In fp32 with the same weights the two forwards differ by rounding only:
LIMIT_MEAN 1e-5, and every token within LIMIT_TOKEN 1e-4 (conform's fp32 log-prob row).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from dayone.adapters.rl import rl_metrics
from dayone.adapters.targets import miles
from rl_iteration import SPEC, miles_tree

LIMIT_MEAN = 1e-5
LIMIT_TOKEN = 1e-4
MILES_CI_LOGPROB_TOL = 0.03  # miles/backends/training_utils/log_utils.py, the --ci-test log-prob checker


def response_logprobs(per_sequence: list[list[float]], requests: list[dict]) -> list[torch.Tensor]:
    """The response tokens' entries of per-sequence log-probs (entry t - 1 is token t's)."""
    return [torch.tensor(lp[len(r["prompt"]) - 1 :]) for lp, r in zip(per_sequence, requests, strict=True)]


def dispatch(tree, package_root, package: str, spec) -> dict:
    """Miles' convert_to_hf from `tree` on the embedding, in a fresh interpreter (the dispatch is imported once per
    process): {"names": [...]} or {"raised": the Miles function a stand-in reported}."""
    script = textwrap.dedent(f"""
        import json, sys
        from argparse import Namespace
        import torch
        from dayone.adapters.megatron.miles_entry import NotVendored, miles_convert_to_hf
        sys.path.insert(0, {str(package_root)!r})
        convert_to_hf = miles_convert_to_hf(__import__("pathlib").Path({str(tree)!r}))
        try:
            pairs = convert_to_hf(Namespace(vocab_size={spec.vocab_size}), {package!r},
                                  "module.module.embedding.word_embeddings.weight",
                                  torch.zeros({spec.vocab_size}, {spec.hidden_size}))
            print(json.dumps({{"names": [n for n, _ in pairs]}}))
        except NotVendored as err:
            print(json.dumps({{"raised": err.function}}))
    """)
    proc = subprocess.run(
        [sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_patch_is_what_routes_our_name_to_our_converter(tmp_path):
    """Without the patch Miles' substring dispatch sends `dayone_kimi_k3_..._miles` to its own kimi_k3 converter
    (reported by its stand-in); with it, to the package's, which names the checkpoint's embedding."""
    from dayone.adapters.targets import common
    from dayone.programs.megatron.train_step import stand_in

    spec = stand_in(SPEC, None)
    files = miles.files(spec)
    common.write_tree(tmp_path / "package", files)
    name = miles.model_name(spec)
    patch = files["miles_megatron_to_hf.patch"]
    patched = dispatch(miles_tree(tmp_path / "patched", patch), tmp_path / "package", name, spec)
    unpatched = dispatch(miles_tree(tmp_path / "unpatched", None), tmp_path / "package", name, spec)
    assert unpatched == {"raised": "miles.backends.megatron_utils.megatron_to_hf.kimi_k3.convert_kimi_k3_to_hf"}
    assert patched == {"names": ["language_model.model.embed_tokens.weight"]}


@pytest.mark.slow
def test_miles_converter_entry_gives_the_checkpoint_tensors(rl_iteration):
    trainer = rl_iteration.trainer
    print({k: trainer[k] for k in ("model_name", "synced_tensors", "failures", "seconds")}, rl_iteration.seconds)
    assert trainer["model_name"] == miles.model_name(rl_iteration.spec)
    assert trainer["failures"] == []  # every checkpoint tensor, by name and bytes, and nothing else
    assert trainer["synced_tensors"] > 150


@pytest.mark.slow
def test_train_rollout_logprob_abs_diff_megatron_against_vllm(rl_iteration):
    session, trainer = rl_iteration.session, rl_iteration.trainer
    requests = session["requests"]
    assert session["engine"]["dtype"] == "float32" and all(len(r["response"]) == 8 for r in requests)
    train = response_logprobs(trainer["before"], requests)
    rollout = [torch.tensor(r["rollout_logprobs"]) for r in requests]
    metrics = rl_metrics(train, rollout)
    # the engine's own scoring of the whole sequences (prompt log-probs), against the same Megatron forward
    scored = rl_metrics([torch.tensor(x) for x in trainer["before"]], [torch.tensor(x) for x in session["before"]])
    print("rollout", metrics, "scored", scored)
    assert metrics["tokens"] == 24 and scored["tokens"] == sum(len(r["prompt"]) + 7 for r in requests)
    assert metrics["train_rollout_logprob_abs_diff"] <= LIMIT_MEAN < MILES_CI_LOGPROB_TOL
    assert metrics["train_rollout_logprob_abs_diff_max"] <= LIMIT_TOKEN
    assert scored["train_rollout_logprob_abs_diff"] <= LIMIT_MEAN
    assert scored["train_rollout_logprob_abs_diff_max"] <= LIMIT_TOKEN
    # the same measure sees a policy that moved: the trained model against this (pre-step) rollout
    stale = rl_metrics(response_logprobs(trainer["after"], requests), rollout)
    assert stale["train_rollout_logprob_abs_diff"] > 100 * LIMIT_MEAN
