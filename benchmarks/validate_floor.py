"""The noise floor's k: how far the fast tier's un-replayed end-to-end figures sit from the floor's.

    python benchmarks/validate_floor.py [--quick] [--defects]

For synthetic K3 checkpoints (ordinary routers at 6, 13, 24 and 93 layers; near-tied routers, tests/validate/
near_tied.py, at 13 and 24 layers; seeds 0-2) it runs `integrate validate` (fast tier vs the reference tier,
built-in 2 x 72 tokens) and prints, per judged figure, the candidate's value, the floor's and their ratio; then
the largest ratio per figure over all checkpoints, which FLOOR_K (dayone.validate.floor) must stay above. The
ratio is the candidate's figure over what k multiplies (floor.floor_scale: the floor's figure; for the top-1
disagreement its count plus two standard deviations); p95 is reported, not judged (its plain ratio).
--defects: the same on the near-tied checkpoints with a defect planted in one fast-tier op (the routed experts'
combine negated, or scaled by 1.1), the ratios a wrong op gives. One thread; a few minutes on two cores.
"""

from __future__ import annotations

import os
import sys

# benchmarks/ holds scripts named like modules (inspect.py shadows the standard library's): off the import path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]

import argparse
import contextlib
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "validate"))

JUDGED = ("logits_rel_rms", "mean_abs", "kl_mean", "top1_disagreement")
SHOWN = (*JUDGED, "p95_abs")


def ordinary(path: Path, layers: int, seed: int) -> Path:
    from dayone.spec.registry import load_spec
    from dayone.synth import scaled_spec, write_synthetic

    write_synthetic(scaled_spec(load_spec("kimi-k3"), "tiny", layers), path, seed=seed)
    return path


@contextlib.contextmanager
def planted(defect: str | None):
    """A defect in the fast tier's routed-experts combine (the op behind latent_normed)."""
    import dayone.kernels.moe_combine as module

    original = module.moe_combine
    factor = {"negated": -1.0, "scaled 1.1": 1.1}.get(defect or "", 1.0)
    module.moe_combine = lambda *args, **kwargs: original(*args, **kwargs) * factor
    try:
        yield
    finally:
        module.moe_combine = original


def measure(path: Path, defect: str | None = None) -> dict:
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.validate import Options, validate

    checkpoint = open_checkpoint(str(path))
    with planted(defect):
        verdict = validate(
            checkpoint, spec_for_checkpoint(checkpoint, None), Options(reference="naive", reload_check=False)
        )
    assert verdict.report is not None  # one process: its only rank holds the report
    u = verdict.report.details["unreplayed"]
    return {"status": verdict.status, "candidate": u["candidate"], "floor": u["floor"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="13 layers only, seed 0")
    parser.add_argument("--defects", action="store_true", help="also planted defects on the near-tied checkpoints")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from near_tied import near_tied_k3

    seeds = (0,) if args.quick else (0, 1, 2)
    cases = [("ordinary", n, s) for n in ((13,) if args.quick else (6, 13, 24)) for s in seeds]
    cases += [("near-tied", n, s) for n in ((13,) if args.quick else (13, 24)) for s in seeds]
    if not args.quick:
        cases.append(("ordinary", 93, 0))
    from dayone.validate.floor import floor_scale

    worst = dict.fromkeys(SHOWN, 0.0)
    header = "".join(f"{name:>26}" for name in SHOWN)
    print(f"{'checkpoint':<24}{'status':>7}{header}   (candidate / floor = ratio)")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, layers, seed in cases:
            path = Path(tmp) / f"{kind}-{layers}-{seed}"
            (near_tied_k3 if kind == "near-tied" else ordinary)(path, layers, seed)
            defects = [None, "negated", "scaled 1.1"] if args.defects and kind == "near-tied" else [None]
            for defect in defects:
                m = measure(path, defect)
                cells = []
                for name in SHOWN:
                    c = m["candidate"][name]
                    f = floor_scale(name, m["floor"]) if name in JUDGED else m["floor"][name]
                    ratio = c / f if f > 0 else float("inf") if c > 0 else 1.0
                    if defect is None and f > 0:
                        worst[name] = max(worst[name], ratio)
                    cells.append(f"{c:9.3g} /{f:9.3g} ={ratio:5.2f}")
                label = f"{kind} {layers}L s{seed}" + (f" [{defect}]" if defect else "")
                print(f"{label:<24}{m['status']:>7}" + "".join(f"{cell:>26}" for cell in cells), flush=True)
    print("largest ratio without a defect: " + ", ".join(f"{k} {v:.2f}" for k, v in worst.items()))


if __name__ == "__main__":
    main()
