"""The trainer's model: parameters as Megatron holds them (fused linear_fc1, in_proj, conv1d, per-expert
linear_fc1.weight{e}), a forward over packed sequences with autograd, per-token log-probs.

The parameters come from the checkpoint through the megatron table (the generated Miles loader, or the same walker
here). The forward reads them the way Megatron's modules read their own parameters, by the consumer's part order
(contracts.CONSUMER_ORDER: in_proj is [q, k, v, g], linear_fc1 is [gate, up]), never through the table, so a table
that put a part in the wrong place shows up as a log-prob gap against the rollout engine.
The math itself is the reference tier's (`dayone.adapters.model`), run with the parameters bound to its weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from dayone.adapters.model import SpecModel
from dayone.adapters.model.batch import Batch
from dayone.adapters.weightmap import build_weight_map, walk
from dayone.adapters.weightmap.contracts import CONSUMER_ORDER, reading_key
from dayone.adapters.weightmap.layouts import MEGATRON_EXPERTS, MEGATRON_GLOBAL, MEGATRON_LAYER
from dayone.spec.schema import ModelSpec
from torch import nn

Converter = Callable[[Callable[[str], torch.Tensor]], dict[str, torch.Tensor]]


class TrainingModel(nn.Module):
    """params: Megatron-layout tensors of one rank at TP 1, EP 1 with dequantized experts (name -> tensor)."""

    def __init__(self, spec: ModelSpec, params: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.spec = spec
        self.names = sorted(params)
        for i, name in enumerate(self.names):
            self.register_parameter(f"p{i}", nn.Parameter(params[name].float().clone()))
        # Training holds experts dequantized (Miles trains K3 on the BF16 conversion), so the core is the spec without
        # its MXFP4 quantization: float expert weights the Megatron parameters can be bound to.
        self.core = SpecModel(spec.model_copy(update={"quantization": None}), "reference", device="meta")
        self.core.to_empty(device="cpu")

    @classmethod
    def from_checkpoint(cls, spec: ModelSpec, tensors: dict[str, torch.Tensor], convert: Converter | None = None):
        """convert(get) -> Megatron state dict; default: the megatron table walked here (TP 1, EP 1, fp32)."""
        if convert is None:
            table = build_weight_map(spec, "megatron", mxfp4="dequantize")

            def convert(get):
                return walk.to_target(table, get, walk.Parallel(), dtype=torch.float32)

        return cls(spec, convert(tensors.__getitem__))

    def megatron_params(self) -> dict[str, nn.Parameter]:
        return {name: getattr(self, f"p{i}") for i, name in enumerate(self.names)}

    def forward(self, sequences: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """sequences: B 1-D token tensors, packed into one batch -> B tensors [n_b - 1] of log p(token t+1 | <= t)."""
        bind(self.core, self.spec, self.megatron_params())
        seqlens = tuple(int(s.numel()) for s in sequences)
        ids = torch.cat([s.view(-1) for s in sequences])
        logits = self.core.forward_packed(ids, Batch(seqlens, (0,) * len(seqlens)), None, None)
        logp = F.log_softmax(logits.float(), dim=-1)
        out, start = [], 0
        for n in seqlens:
            nxt = ids[start + 1 : start + n]
            out.append(logp[start : start + n - 1].gather(1, nxt[:, None])[:, 0])
            start += n
        return out


def bind(model: SpecModel, spec: ModelSpec, params: dict[str, torch.Tensor]) -> None:
    """Point every weight of `model` at its Megatron parameter (views, so gradients flow), then rebuild the derived
    tensors from them."""
    names = {role: name.format(last=spec.num_layers - 1) for role, name in MEGATRON_GLOBAL.items()}
    _bind_part(model.embed_tokens, params, names, None)
    _bind_part(model.head, params, names, None)
    for layer in model.layers:
        _bind_part(layer, params, {r: f"decoder.layers.{layer.index}.{n}" for r, (n, _) in MEGATRON_LAYER.items()},
                   layer.index)  # fmt: skip
    model.refresh_derived()


def _bind_part(part, params: dict[str, torch.Tensor], names: dict[str, str], layer: int | None) -> None:
    targets = part.role_targets()
    fused: dict[str, list[str]] = {}
    for role in targets:
        if role in names:
            fused.setdefault(names[role], []).append(role)
    for role, (module, attr) in targets.items():
        shape = getattr(module, attr).shape
        if role.startswith("moe.expert."):
            value = _experts(params, layer, role.split(".")[2], shape[0])
        else:
            name = names[role]
            value = params[name]
            if len(fused[name]) > 1:
                members = sorted(fused[name], key=lambda r: CONSUMER_ORDER.index(reading_key(r)))
                value = value.chunk(len(members))[members.index(role)]
        setattr(module, attr, value.reshape(shape))


def _experts(params: dict[str, torch.Tensor], layer: int, proj: str, count: int) -> torch.Tensor:
    """Stack expert `proj` ("gate", "up", "down") of every expert: linear_fc1.weight{e} is [gate; up]."""
    stem, part = MEGATRON_EXPERTS[proj]
    per_expert = [params[f"decoder.layers.{layer}.mlp.experts.{stem}.weight{e}"] for e in range(count)]
    if part is not None:
        per_expert = [w.chunk(2)[("gate", "up").index(proj)] for w in per_expert]
    return torch.stack(per_expert)
