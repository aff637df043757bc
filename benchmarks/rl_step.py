"""CPU time of one training step of the Megatron model with the chunked KDA against the reference recurrence.

    PYTHONPATH=.venv/peers/megatron python benchmarks/rl_step.py [--scale tiny|faithful] [--tokens T] [--batch B]
                                                                 [--repeats N] [--threads N] [--json FILE]

One step = forward, mean next-token cross-entropy, backward and an SGD update of megatron-core's GPTModel built by
dayone (`dayone.adapters.megatron.build_model`, one gloo rank). The KDA layers run either `chunk_kda_autograd` (what
training runs) or `kda_reference`, the token-by-token recurrence the layer ran before, swapped in for the same call.
Both variants run in this process on the same model, batch and thread count, interleaved, median of --repeats; the
figure is the ratio of process CPU times (time.process_time: this process's threads, not the other tenants of a
shared machine), with wall time beside it. Before timing, both variants' losses are compared (they compute the same
function: a ratio against a wrong computation would mean nothing).

Scales: tiny is the stand-in the checks use (4 layers, hidden 64, 2 KDA heads of 16), the whole model's step.
faithful is dayone.synth's faithful scale (4 layers, hidden 1792, K3's 96 KDA heads of 128, 17 experts of 3072):
its whole-model step does not fit a shared 23 GB machine (one try at 64 tokens passed 18 GB resident and was
ended without a report: parameters, gradients and the reference recurrence's saved per-token states of 96 x 128 x 128), so at
that scale the step is the KDA op's alone (`--scale faithful`: the layer's KDA call, forward and backward of a loss
over its output, at K3's heads and head dim), where the two paths differ; the reference's saved states grow by
~25 MB a token. On a GPU, chunk_kda's Triton forward and backward against fla are the kernel benchmark's
(benchmarks/kernels.py) once a Triton backward exists: not here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def build(scale: str):
    from dayone.adapters.megatron import build_model
    from dayone.programs.megatron.verify import tiny_stand_in
    from dayone.spec.registry import load_spec
    from dayone.synth import scaled_spec

    full = load_spec("kimi-k3")
    spec = tiny_stand_in(full) if scale == "tiny" else scaled_spec(full, "faithful")
    torch.manual_seed(0)
    return spec, build_model(spec)


def reference_kda(q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
                  cu_seqlens, use_qk_l2norm, beta_logits):  # fmt: skip
    """kda_reference behind chunk_kda_autograd's signature: the layer's call, unchanged, runs the recurrence."""
    from dayone.kernels.kda.reference import kda_reference

    o, final = kda_reference(q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, cu_seqlens,
                             use_qk_l2norm, beta_logits)  # fmt: skip
    return o.to(v.dtype), final if output_final_state else None


def step(model, ids: torch.Tensor, lr: float = 1e-3) -> float:
    model.zero_grad(set_to_none=True)
    logits = model(ids, position_ids=None, attention_mask=None)
    loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)
    return float(loss)


def kda_op_step(spec, tokens: int, batch: int):
    """The KDA call of one layer at the spec's heads and head dim, as the layer makes it: a step function for a path
    (forward, a loss over the output, backward)."""
    H, K = spec.kda.num_heads, spec.kda.head_dim
    gen = torch.Generator().manual_seed(0)
    x = {n: torch.randn(*s, generator=gen).requires_grad_() for n, s in {
        "q": (batch, tokens, H, K), "k": (batch, tokens, H, K), "v": (batch, tokens, H, K), "g": (batch, tokens, H, K),
        "beta": (batch, tokens, H), "A_log": (H,), "dt_bias": (H * K,)}.items()}  # fmt: skip
    lower = spec.kda.gate.lower_bound if spec.kda.gate.lower_bound is not None else -5.0

    def run(path) -> float:
        o, _ = path(x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"], x["dt_bias"], spec.kda.gate.kind, lower,
                    None, None, False, None, True, True)  # fmt: skip
        loss = o.float().pow(2).mean()
        torch.autograd.grad(loss, list(x.values()))
        return float(loss)

    return run


def timed(model, ids) -> tuple[float, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    loss = step(model, ids)
    return time.process_time() - cpu, time.perf_counter() - wall, loss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("tiny", "faithful"), default="tiny")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    import torch.distributed as dist
    from dayone.adapters.megatron import kda as kda_layer
    from dayone.programs.megatron.verify import _free_port
    from megatron.core import parallel_state as ps

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    dist.init_process_group("gloo", rank=0, world_size=1)
    ps.initialize_model_parallel(1, 1)
    variants = {"chunked": kda_layer.chunk_kda_autograd, "reference": reference_kda}
    if args.scale == "faithful":
        from dayone.spec.registry import load_spec
        from dayone.synth import scaled_spec

        spec = scaled_spec(load_spec("kimi-k3"), "faithful")
        op = kda_op_step(spec, args.tokens, args.batch)

        def run(name: str) -> tuple[float, float, float]:
            cpu, wall = time.process_time(), time.perf_counter()
            loss = op(variants[name])
            return time.process_time() - cpu, time.perf_counter() - wall, loss

        return measure(args, spec, "kda op (forward + backward)", variants, run)
    spec, model = build(args.scale)
    model.train()
    ids = torch.randint(3, spec.vocab_size, (args.batch, args.tokens), generator=torch.Generator().manual_seed(1))
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}

    def run(name: str) -> tuple[float, float, float]:
        kda_layer.chunk_kda_autograd = variants[name]
        try:
            with torch.no_grad():  # every measured step starts from the same weights
                for n, p in model.named_parameters():
                    p.copy_(initial[n])
            return timed(model, ids)
        finally:
            kda_layer.chunk_kda_autograd = variants["chunked"]

    return measure(args, spec, "model training step (forward, loss, backward, SGD)", variants, run)


def measure(args, spec, what: str, variants, run) -> int:
    """Warm-up (each variant once, losses compared), then --repeats interleaved rounds; prints the report."""
    losses = {name: run(name)[2] for name in variants}  # also the warm-up
    agree = abs(losses["chunked"] - losses["reference"]) <= 1e-4 * max(1.0, abs(losses["reference"]))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name in variants:
            cpu, wall, _ = run(name)
            times[name].append((cpu, wall))
    med = {name: (statistics.median(c for c, _ in t), statistics.median(w for _, w in t)) for name, t in times.items()}
    report = {
        "step": what, "scale": args.scale, "spec": spec.name, "layers": spec.num_layers, "kda_layers": spec.attention_kinds.count("kda"),
        "kda_heads": spec.kda.num_heads, "kda_head_dim": spec.kda.head_dim, "batch": args.batch, "tokens": args.tokens,
        "threads": args.threads, "repeats": args.repeats, "losses": losses, "losses_agree": agree,
        "cpu_s": {n: round(c, 4) for n, (c, _) in med.items()}, "wall_s": {n: round(w, 4) for n, (_, w) in med.items()},
        "reference_over_chunked_cpu": round(med["reference"][0] / med["chunked"][0], 2),
        "reference_over_chunked_wall": round(med["reference"][1] / med["chunked"][1], 2),
    }  # fmt: skip
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
