"""One optimizer step in the Megatron model against the same step in dayone's reference tier (fp32, one gloo rank).

    python -m dayone.programs.megatron.train_step SPEC|FILE [--layers N] [--lr LR]

Both models load the same synthetic checkpoint of the tiny stand-in, take the same batch, compute the same loss
(mean next-token cross-entropy, fp32 logits) and take one plain SGD step. The reference tier holds its weights as
buffers and runs `forward` in inference mode: each float weight becomes a leaf that requires grad, the derived
tensors (attention-residual score vectors, ...) are recomputed from those leaves under autograd, the logits come
from `forward_packed` (what `forward` runs), and w <- w - lr * grad.
Both models' updated weights go back to checkpoint names through their own layouts of the weight map (Megatron's
and the canonical one) and are compared tensor by tensor; so are the losses.

The stand-in is stored unquantized: the reference tier keeps MXFP4 experts as packed bytes, which have no gradient.
The Megatron config has no auxiliary MoE loss (load balancing "none", config.py), so both minimise the same loss;
the router's expert-bias update happens in Megatron-LM's finalize_model_grads, not in an optimizer step, so the
step leaves it alone in both. `--plant stale-derived` keeps the reference tier's derived tensors out of autograd
(its attention-residual weights then get no gradient): the check must fail. Prints one JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

LIMIT = 1e-5  # fp32, the loss and every updated weight


def stand_in(spec_name: str, layers: int | None):
    from dayone.programs.megatron.verify import tiny_stand_in
    from dayone.spec.registry import load_spec, spec_to_dict
    from dayone.spec.schema import ModelSpec

    data = spec_to_dict(tiny_stand_in(load_spec(spec_name), layers))
    data["quantization"] = None
    return ModelSpec.model_validate(data)


def loss_of(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of [b, s, V] logits in fp32."""
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def megatron_step(spec, tensors, ids, lr: float) -> tuple[float, dict[str, torch.Tensor]]:
    from dayone.adapters.megatron import build_model
    from dayone.adapters.weightmap import build_weight_map, walk

    torch.manual_seed(0)
    model = build_model(spec)
    table = build_weight_map(spec, "megatron", mxfp4="dequantize")
    state = walk.to_target(table, tensors.__getitem__, walk.Parallel(), dtype=torch.float32)
    passthrough = {r.target for r in table.RULES if r.transform == "passthrough"}
    model.load_state_dict({n: v for n, v in state.items() if n not in passthrough}, strict=False)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    optimizer.zero_grad()
    loss = loss_of(model(ids, position_ids=None, attention_mask=None), ids)
    loss.backward()
    optimizer.step()
    after = {n: v.detach() for n, v in model.state_dict().items() if not n.endswith("._extra_state")}
    after |= {n: v for n, v in state.items() if n in passthrough}
    return float(loss), walk.to_hf(table, {(0, 0): after}, walk.Parallel())


def reference_step(spec, tensors, ids, lr: float, plant: str | None = None) -> tuple[float, dict[str, torch.Tensor]]:
    from dayone.adapters.model import SpecModel, WeightLoader
    from dayone.adapters.model.weights import canonical_map
    from dayone.adapters.weightmap import walk

    model = SpecModel(spec, "reference")
    WeightLoader(spec, tensors.__getitem__).load(model)
    derived = {(m, n) for m in model.modules() for n, b in m._buffers.items() if n not in m.state_dict()}
    leaves = {}
    for module_name, module in model.named_modules():
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and buffer.is_floating_point() and (module, name) not in derived:
                module._buffers[name] = buffer.detach().clone().requires_grad_()
                leaves[f"{module_name}.{name}" if module_name else name] = module._buffers[name]
    if plant != "stale-derived":
        model.refresh_derived()  # under autograd: the derived tensors depend on the leaves
    # forward_packed, not forward: forward runs in inference mode (equal lengths: packed rows are [b, s] in order)
    packed, batch = model.pack(ids, None, None)
    loss = loss_of(model.forward_packed(packed, batch, None, None).view(*ids.shape, -1), ids)
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    with torch.no_grad():
        updated = {n: (w - lr * g if g is not None else w).detach() for (n, w), g in zip(leaves.items(), grads)}
    table = canonical_map(spec)
    kept = {r.target: tensors[r.source] for r in table.RULES if r.transform == "passthrough"}  # a vision tower
    state = dict(model.state_dict()) | updated | kept
    return float(loss), walk.to_hf(table, {(0, 0): state}, walk.Parallel())


def run(spec_name: str, layers: int | None, lr: float, plant: str | None = None) -> dict:
    import torch.distributed as dist
    from dayone.programs.megatron.verify import _free_port, synthetic_checkpoint
    from megatron.core import parallel_state as ps

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    dist.init_process_group("gloo", rank=0, world_size=1)
    ps.initialize_model_parallel(1, 1)
    spec = stand_in(spec_name, layers)
    with tempfile.TemporaryDirectory() as folder:
        tensors = synthetic_checkpoint(spec, Path(folder))
    tensors = {n: v.float() if v.is_floating_point() else v for n, v in tensors.items()}
    ids = torch.randint(3, spec.vocab_size, (2, 16), generator=torch.Generator().manual_seed(1))
    meg_loss, meg = megatron_step(spec, tensors, ids, lr)
    ref_loss, ref = reference_step(spec, tensors, ids, lr, plant)
    report: dict = {"spec": spec.name, "layers": spec.num_layers, "lr": lr, "megatron_loss": meg_loss,
                    "reference_loss": ref_loss, "loss_abs_diff": abs(meg_loss - ref_loss), "failures": []}  # fmt: skip
    fail = report["failures"].append
    if not report["loss_abs_diff"] <= LIMIT:
        fail(f"loss differs by {report['loss_abs_diff']:.3g} > {LIMIT}")
    for name in sorted(set(meg) ^ set(ref)):
        fail(f"{name}: updated by {'Megatron' if name in meg else 'the reference'} only")
    worst, moved = 0.0, 0
    for name in sorted(set(meg) & set(ref)):
        a, b = meg[name].float(), ref[name].float()
        diff = float((a - b).abs().max()) if a.numel() else 0.0
        worst = max(worst, diff)
        moved += int(not torch.equal(b, tensors[name].float()))
        if not diff <= LIMIT:
            fail(f"{name}: updated weights differ by {diff:.3g} > {LIMIT}")
    report |= {"tensors": len(set(meg) & set(ref)), "tensors_moved": moved, "updated_weight_abs_diff_max": worst}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--plant", choices=["stale-derived"], help="plant a mistake the check must report (tests)")
    args = parser.parse_args(argv)
    report = run(args.spec, args.layers, args.lr, args.plant)
    print(json.dumps(report, indent=1))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
