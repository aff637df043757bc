"""Train/rollout log-prob parity, the numbers Miles gates RL runs on.

train_rollout_logprob_abs_diff  mean |log p_train - log p_rollout| over response tokens
train_rollout_kl                k3 estimate of KL(rollout || train): mean(exp(d) - 1 - d), d = lp_train - lp_rollout
"""

from __future__ import annotations

import torch
from dayone.adapters.rl.rollout import rollout
from dayone.adapters.rl.training import Converter, TrainingModel
from dayone.spec.schema import ModelSpec


def rl_metrics(train: list[torch.Tensor], rollout_lp: list[torch.Tensor]) -> dict[str, float]:
    d = torch.cat([t.detach().double() - r.double() for t, r in zip(train, rollout_lp)])
    return {
        "train_rollout_logprob_abs_diff": float(d.abs().mean()),
        "train_rollout_logprob_abs_diff_max": float(d.abs().max()),
        "train_rollout_kl": float((d.exp() - 1 - d).mean()),
        "tokens": int(d.numel()),
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
