"""A tiny K3 in the release format whose routers tie within bf16 resolution (for the noise-floor tests and
benchmarks/validate_floor.py).

A linear router cannot be made to tie more often by shrinking the gaps between its rows: the fast tier's error in a
gap shrinks with the gap (both are x . (w_a - w_b)), so a flip stays as rare as bf16's relative error. What bf16
cannot resolve is a difference of two nearly equal inputs, so the checkpoint makes one:

- residual channels 0 and 1 are the same channel written twice: the embedding's column 1 and row 1 of every
  projection that writes the residual stream (KDA and MLA o_proj, the dense MLP's down, the shared experts' down,
  the latent MoE's up) copy channel 0's, so both tiers carry h1 = h0 exactly;
- each post-attention norm weight of channel 1 is one bf16 step above channel 0's, so the router input holds
  x1 = x0 (1 + 2^-7): a difference fp32 resolves, and bf16 (whose step is 2^-8 to 2^-7 of x0) rounds to 0, 1 or 2
  steps at random;
- each router row reads V s_e (x1 - x0) (s_e ~ N(0, 1), V = 32) plus a part common to all experts (the scores'
  size, not their order) and a small random part (0.02 of the usual scale), with no correction bias: the experts'
  scores sit within a few hundredths of each other and the bf16 noise on (x1 - x0) reorders some of them;
- the latent MoE's up projection is doubled, so a flipped expert moves its token visibly.

Replayed, the fast tier is as close as everywhere else (the weights of the replayed experts move by ~1e-2); routing
itself, up to 10% of its choices in a MoE layer differ from the reference's and, carried through 13 layers, move
the logits by ~15% (relative RMS) and a fifth of the top-1 tokens: the figures of the issue's independent K3.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import torch

TIE_SCALE = 32.0  # V: the router's weight on (x1 - x0)
SPREAD = 0.02  # the random part of the router rows, relative to the usual 1/sqrt(hidden)
COMMON = 8.0  # the part of the router rows common to every expert, relative to 1/sqrt(hidden)
LATENT_UP_GAIN = 2.0
RESIDUAL_WRITERS = ("kda.o_proj", "mla.o_proj", "mlp.down", "moe.shared.down", "moe.latent_up")


def near_tied_k3(path: Path, layers: int = 13, seed: int = 0) -> Path:
    from dayone.checkpoint.writer import write_checkpoint
    from dayone.spec.hf_config import to_hf_config
    from dayone.spec.manifest import build_manifest
    from dayone.spec.registry import load_spec
    from dayone.synth import SyntheticData, scaled_spec

    spec = scaled_spec(load_spec("kimi-k3"), "tiny", layers)
    hidden = spec.hidden_size

    class NearTied(SyntheticData):
        def tensor(self, t):
            x = super().tensor(t)
            if t.role == "embed":
                x[:, 1] = x[:, 0]
            elif t.role in RESIDUAL_WRITERS:
                if t.role == "moe.latent_up":
                    x = (x.float() * LATENT_UP_GAIN).to(x.dtype)
                x[1] = x[0]
            elif t.role == "post_attention_norm":
                x[1] = (x[0].float() * (1 + 2**-7)).to(x.dtype)
            elif t.role == "moe.router":
                gen = torch.Generator().manual_seed(seed * 2**32 + zlib.crc32(t.name.encode()))
                experts = x.shape[0]
                common = COMMON * torch.randn(1, hidden, generator=gen)
                rows = (common + SPREAD * torch.randn(experts, hidden, generator=gen)) / hidden**0.5
                tie = TIE_SCALE * torch.randn(experts, generator=gen)
                rows[:, 0] -= tie
                rows[:, 1] += tie
                x = rows.to(x.dtype)
            elif t.role == "moe.correction_bias":
                x = torch.zeros_like(x)
            return x

    manifest = build_manifest(spec)
    write_checkpoint(path, to_hf_config(spec), list(manifest.tensors), spec.release.num_shards or 1,
                     data=NearTied(spec, seed))  # fmt: skip
    return path
