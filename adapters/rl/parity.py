"""Train/rollout log-prob parity, the numbers Miles gates RL runs on.

train_rollout_logprob_abs_diff  mean |log p_train - log p_rollout| over each sample's response tokens, averaged over
                                samples
train_rollout_kl                k3 estimate of KL(rollout || train): exp(d) - 1 - d, d = lp_train - lp_rollout, reduced
                                the same way

Miles (radixark/miles@c7969ad1f) reduces both with `sum_of_sample_mean` (miles/backends/training_utils/cp_utils.py:
per sample, the masked sum over its response tokens divided by their count; summed over samples) and reports the sum
divided by the number of samples (log_utils.py, `value / num_samples_or_tokens`), the default without
--calculate-per-token-loss (losses.py: `abs_diff = (train_scored_log_probs - rollout_log_probs).abs()`).
"""

from __future__ import annotations

import torch
from dayone.adapters.rl.rollout import rollout
from dayone.adapters.rl.training import Converter, TrainingModel
from dayone.spec.schema import ModelSpec


def rl_metrics(train: list[torch.Tensor], rollout_lp: list[torch.Tensor]) -> dict[str, float]:
    """train, rollout_lp: per sample, [n_i] log-probs of its response tokens under the trainer and the engine."""
    d = [t.detach().double() - r.double() for t, r in zip(train, rollout_lp, strict=True)]
    every = torch.cat(d)
    return {
        "train_rollout_logprob_abs_diff": float(torch.stack([x.abs().mean() for x in d]).mean()),
        "train_rollout_logprob_abs_diff_max": float(every.abs().max()),
        "train_rollout_kl": float(torch.stack([(x.exp() - 1 - x).mean() for x in d]).mean()),
        "tokens": int(every.numel()),
    }


def parity(
    spec: ModelSpec,
    tensors: dict[str, torch.Tensor],
    prompts: list[torch.Tensor],
    response_len: int,
    convert: Converter | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Roll out with the inference model, re-score prompt + response packed with the training model (Megatron
    layout via `convert`, default the megatron table), and compare the response tokens' log-probs."""
    ro = rollout(spec, tensors, prompts, response_len, seed)
    train = TrainingModel.from_checkpoint(spec, tensors, convert)
    lp = train(ro.sequences())
    response_lp = [t[len(p) - 1 :] for t, p in zip(lp, ro.prompts)]
    return rl_metrics(response_lp, ro.logprobs)
