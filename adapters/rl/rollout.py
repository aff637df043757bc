"""The rollout engine's side: the inference model (checkpoint loaded as an engine loads it) prefills each prompt,
then decodes the response one token at a time from its cache, recording the log-prob of every sampled token."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from dayone.adapters.model import SpecModel, WeightLoader
from dayone.spec.schema import ModelSpec


@dataclass
class Rollout:
    prompts: list[torch.Tensor]
    responses: list[torch.Tensor]  # [n] sampled tokens per request
    logprobs: list[torch.Tensor]  # [n] log p of each sampled token under the rollout engine

    def sequences(self) -> list[torch.Tensor]:
        return [torch.cat([p, r]) for p, r in zip(self.prompts, self.responses)]


@torch.inference_mode()
def rollout(
    spec: ModelSpec, tensors: dict[str, torch.Tensor], prompts: list[torch.Tensor], response_len: int, seed: int = 0
) -> Rollout:
    """Sample `response_len` tokens per prompt (temperature 1) with prefill + cached decode, reference tier fp32."""
    model = SpecModel(spec, "reference")
    WeightLoader(spec, tensors.__getitem__).load(model)
    gen = torch.Generator().manual_seed(seed)
    cache = model.new_cache(len(prompts))
    rows = model.prefill(prompts, cache=cache)
    last = torch.stack([r[-1] for r in rows])  # [B, vocab]
    tokens, logprobs = [], []
    for step in range(response_len):
        logp = F.log_softmax(last.float(), dim=-1)
        nxt = torch.multinomial(logp.exp(), 1, generator=gen)[:, 0]
        tokens.append(nxt)
        logprobs.append(logp.gather(1, nxt[:, None])[:, 0])
        if step + 1 < response_len:
            last = model.decode(nxt, cache)
    responses = torch.stack(tokens, 1)
    lps = torch.stack(logprobs, 1)
    return Rollout(list(prompts), list(responses), list(lps))
