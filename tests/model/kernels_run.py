"""Run the fast tier of the small K3 spec with one `kernels` setting and save what it gives (a script, run in a
subprocess by test_kernels.py: the Triton interpreter is chosen when the kernels are decorated, at import, so a
kernels="triton" run on a CPU needs TRITON_INTERPRET=1 set before dayone.kernels is first imported).

    python kernels_run.py KERNELS IN.pt OUT.pt    IN.pt: {"routes": replayed top-k ids}; OUT.pt: logits and backends
"""

from __future__ import annotations

import sys

import torch
from dayone.adapters.model import Capture, SpecModel, WeightLoader
from model_fixtures import kernels_k3_spec, random_checkpoint

PROMPTS_SEED, EXTRA = 7, 2


def prompts() -> tuple[torch.Tensor, list[int], torch.Tensor]:
    """Requests of 20, 7 and 1 tokens (left-aligned ids [3, 20]) and EXTRA decode tokens per request."""
    gen = torch.Generator().manual_seed(PROMPTS_SEED)
    ids, lengths = torch.randint(3, 96, (3, 20), generator=gen), [20, 7, 1]
    for b, n in enumerate(lengths):
        ids[b, n:] = 0
    return ids, lengths, torch.randint(3, 96, (3, EXTRA), generator=gen)


def run(kernels: str, routes: dict[str, torch.Tensor]) -> dict:
    """Full forward (reference routing replayed), then prefill + EXTRA decode steps against an own-routing full
    forward of the same tokens; every op's backend."""
    torch.set_num_threads(1)
    spec = kernels_k3_spec()
    model = SpecModel(spec, "fast", kernels=kernels)
    WeightLoader(spec, random_checkpoint(spec, seed=4).__getitem__).load(model)
    ids, lengths, extra = prompts()
    out = {"replayed": model(ids, lengths, capture=Capture("-", routes=routes))}
    out["full"] = model([torch.cat([ids[b, :n], extra[b]]) for b, n in enumerate(lengths)])
    cache = model.new_cache(len(lengths))
    out["prefill"] = model.prefill(ids, lengths, cache)
    out["decode"] = torch.stack([model.decode(extra[:, t], cache) for t in range(EXTRA)])
    out["backends"] = model.backends()
    return out


if __name__ == "__main__":
    kernels, src, dst = sys.argv[1:]
    torch.save(run(kernels, torch.load(src)["routes"]), dst)
