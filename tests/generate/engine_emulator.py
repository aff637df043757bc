"""An inference engine's side of weight loading, on the CPU: the parameters SGLang / vLLM would create for one
tensor-parallel and expert-parallel rank, with weight_loaders that follow the engines' contract.

- merged column-parallel linear: `weight_loader(param, w, shard_id)` writes part `shard_id` (offset = this rank's
  sizes of the parts before it) with this rank's rows of w, or all of w for a part every rank holds whole (vLLM's
  KDA f_a); rows past the parts (alignment padding) stay zero;
- column / row parallel: this rank's rows / columns; replicated: all of w;
- FusedMoE: `weight_loader(param, w, weight_name, shard_id=, expert_id=)`; experts of other EP ranks are ignored;
  w13 holds [w1; w3] (this rank's rows of each), w2 this rank's columns.
Every element written is counted, so a test can ask that each was written exactly once.
"""

from __future__ import annotations

import torch
from dayone.adapters.weightmap import walk
from torch import nn

FUSED_MOE_PART = {"w1": 0, "w3": 1}


class EngineModel(nn.Module):
    def __init__(self, table, par: walk.Parallel) -> None:
        super().__init__()
        self.par = par
        self.writes: dict[str, torch.Tensor] = {}
        self.decls: dict[str, walk.Param] = {}
        for param in table.PARAMS:
            if param.name.startswith(("vision_tower", "mm_projector")):
                continue  # a text-only engine model has no vision tower
            for layer in walk.layer_indices(table, param.layers):
                name = walk.fill(param.name, layer)
                dtype = walk.DTYPES[param.dtype]
                value = torch.zeros(walk.local_shape(table, param, par), dtype=dtype)
                tensor = nn.Parameter(value, requires_grad=False)
                tensor.weight_loader = self._loader(name, param, table)
                self._register(name, tensor)
                self.writes[name] = torch.zeros(value.shape, dtype=torch.int32)
                self.decls[name] = param

    def _register(self, name: str, tensor: nn.Parameter) -> None:
        module: nn.Module = self
        *path, leaf = name.split(".")
        for part in path:
            if not hasattr(module, part):
                module.add_module(part, nn.Module())
            module = getattr(module, part)
        module.register_parameter(leaf, tensor)

    def _loader(self, name: str, param: walk.Param, table):
        par = self.par

        def rows(w: torch.Tensor, dim: int) -> torch.Tensor:
            size = w.shape[dim] // par.tp_size
            return w.narrow(dim, par.tp_rank * size, size)

        def write(index, value) -> None:
            target = dict(self.named_parameters())[name]
            target.data[index] = value.reshape(target.data[index].shape)
            self.writes[name][index] += 1

        def merged(p, w, shard_id):
            sizes = walk.part_sizes(param, par.tp_size)
            start = sum(sizes[:shard_id])
            whole = shard_id in param.replicated_parts
            write((slice(start, start + sizes[shard_id]),), w if whole else rows(w, 0))

        def plain(p, w):
            if param.tp == "column":
                write((slice(None),), rows(w, 0))
            elif param.tp == "row":
                write((slice(None),), rows(w, 1))
            else:
                write((slice(None),), w)

        def fused_moe(p, w, weight_name, shard_id, expert_id):
            per_rank = table.NUM_EXPERTS // par.ep_size
            if expert_id // per_rank != par.ep_rank:
                return
            local = expert_id % per_rank
            if shard_id == "w2":
                write((local,), rows(w, 1))
            else:
                size = w.shape[0] // par.tp_size
                start = FUSED_MOE_PART[shard_id] * size
                write((local, slice(start, start + size)), rows(w, 0))

        if param.experts == "stacked":
            return fused_moe
        return merged if param.parts and param.tp == "column" else plain
