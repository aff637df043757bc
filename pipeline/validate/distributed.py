"""Layers split across ranks (torchrun): rank r runs a contiguous range of layers and hands the residual state on.

    torchrun --nproc-per-node 2 -m dayone validate CHECKPOINT ...

gloo on CPU, nccl on GPU (one device per rank). Rank 0 embeds, the last rank runs the head; the state between ranks
is the packed residual stream (prefix and snapshot bank) of each streamed side, sent as raw bytes so every dtype
travels. Each rank validates its own layers; rank 0 gathers the rows and writes the one report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
from dayone.adapters.model.attn_residual import Stream


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def first(self) -> bool:
        return self.rank == 0

    @property
    def last(self) -> bool:
        return self.rank == self.world - 1

    def layers(self, num_layers: int) -> range:
        """This rank's contiguous share of the layers (sizes differ by at most one)."""
        start = self.rank * num_layers // self.world
        return range(start, (self.rank + 1) * num_layers // self.world)


def init(device: str) -> Ranks:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); else a single rank."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if world <= 1:
        return Ranks(0, 1, torch.device("cuda" if cuda else "cpu"))
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return Ranks(dist.get_rank(), dist.get_world_size(), torch.device(f"cuda:{local}" if cuda else "cpu"))


def send_stream(stream: Stream, dst: int) -> None:
    import torch.distributed as dist

    for t in [stream.prefix, *stream.bank]:
        dist.send(t.contiguous().view(torch.uint8), dst)


def recv_stream(src: int, shape: tuple[int, int], dtype: torch.dtype, bank: int, device) -> Stream:
    import torch.distributed as dist

    N, D = shape
    width = D * torch.empty(0, dtype=dtype).element_size()
    tensors = []
    for _ in range(bank + 1):
        raw = torch.empty(N, width, dtype=torch.uint8, device=device)
        dist.recv(raw, src)
        tensors.append(raw.view(dtype))
    return Stream(tensors[0], tensors[1:])


def gather(obj, ranks: Ranks) -> list | None:
    """Every rank's `obj` on rank 0 (None elsewhere)."""
    if ranks.world == 1:
        return [obj]
    import torch.distributed as dist

    out = [None] * ranks.world if ranks.first else None
    dist.gather_object(obj, out, dst=0)
    return out


def broadcast(obj, ranks: Ranks):
    """Rank 0's `obj` on every rank."""
    if ranks.world == 1:
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def finish(ranks: Ranks, ok: bool) -> None:
    """Leave the group. After an error (bad input met by this rank alone) there is no barrier to wait at: the rank
    exits with its error and torchrun stops the others."""
    if ranks.world > 1:
        import torch.distributed as dist

        if ok:
            dist.barrier()
        dist.destroy_process_group()
