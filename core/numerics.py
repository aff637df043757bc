"""The one numerics comparison of the project: every test, kernel check and validation report goes through here.

A comparison yields max-abs, relative RMS, cosine similarity and NaN/Inf agreement; whether it passes is decided
by one tolerance table keyed by the kind of comparison, so a tolerance is never invented at a call site.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    """Upper bounds on max-abs and relative RMS, lower bound on cosine. None means "not judged"."""

    max_abs: float | None = None
    rel_rms: float | None = None
    cosine: float | None = None


# The tolerance table. Rows say what is compared; the reason for each number is beside it.
TOLERANCES: dict[str, Tolerance] = {
    # Same arithmetic in the same precision: anything but bitwise equality is a bug.
    "exact": Tolerance(max_abs=0.0),
    # fp32 against fp32 with a different association order (chunked vs token-by-token, fused vs unfused).
    "fp32": Tolerance(max_abs=1e-4, rel_rms=1e-5, cosine=0.999999),
    # fp32 reference tier against an independent fp32 implementation (transformers' kimi_linear).
    "fp32_oracle": Tolerance(max_abs=1e-4, rel_rms=1e-4, cosine=0.99999),
    # A kernel in bf16 inputs / fp32 accumulation against its fp32 reference; fla's own tests use ~5e-3 relative RMS.
    "bf16_kernel": Tolerance(rel_rms=5e-3, cosine=0.9999),
    # A kernel fed fp32 and accumulating in fp32 (interpreter runs): tight but not bitwise.
    "fp32_kernel": Tolerance(max_abs=1e-3, rel_rms=1e-4, cosine=0.99999),
    # Whole-model bf16 fast tier against the fp32 reference tier: bf16 rounding compounds over layers.
    "bf16_model": Tolerance(rel_rms=5e-2, cosine=0.995),
    # ---- integrate validate: whole-model scalar metrics whose ideal is 0 (a log-prob difference, a divergence, a
    # disagreement fraction), judged as compare(tensor(value), tensor(0), row), i.e. by max_abs.
    # Next-token |log-prob| differences of the bf16 fast tier against the fp32 truth. Miles gates RL on a mean of
    # 0.1 between engine and trainer (reference/kimi-k3.md); a tier that spends the whole gate on itself leaves
    # nothing for the engine, so half of it.
    "bf16_logprob_mean": Tolerance(max_abs=0.05),
    # Miles' 4-layer K3 prune measured p95 0.11 and max 0.26 between two bf16 stacks: those are the bounds.
    "bf16_logprob_p95": Tolerance(max_abs=0.11),
    "bf16_logprob_max": Tolerance(max_abs=0.26),
    # Mean KL(reference || candidate) per position, nats: logits off by the bf16_model row's 5% of a unit-RMS
    # logit vector give KL ~ var/2 ~ 1e-3; ten times that is a distribution visibly elsewhere.
    "bf16_kl": Tolerance(max_abs=1e-2),
    # Fraction of positions whose argmax differs: a flip needs a top-2 logit gap below the logit error (~1e-2),
    # a few percent of positions for a 256-token vocabulary with unit-spread logits.
    "bf16_top1_disagreement": Tolerance(max_abs=0.05),
    # Fraction of the router's own top-k choices (before replay) that differ from the reference's: random tiny
    # routers put ~10% of tokens within bf16 error of a tie (tests/model/test_k3.py); a systematic router bug
    # (wrong bias, wrong activation, wrong top-k) changes most choices.
    "bf16_topk_disagreement": Tolerance(max_abs=0.25),
    # fp32 on both sides: log-probs at the level of the fp32 logits (fp32, fp32_oracle rows: 1e-4).
    "fp32_logprob": Tolerance(max_abs=1e-4),
    # KL of two distributions whose logits differ by <= 1e-4: below 1e-8.
    "fp32_kl": Tolerance(max_abs=1e-8),
    # An fp32 flip needs a top-2 gap below 1e-4 (the logits row): once in 1e3 positions or fewer; allow 1%.
    "fp32_top1_disagreement": Tolerance(max_abs=0.01),
    "fp32_topk_disagreement": Tolerance(max_abs=0.01),
}


@dataclass(frozen=True)
class Comparison:
    """How far `actual` is from `expected`, and whether that is within `tolerance`."""

    max_abs: float
    rel_rms: float
    cosine: float
    nonfinite_agree: bool
    tolerance: str
    passed: bool

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        verdict = "ok" if self.passed else "FAIL"
        return (
            f"{verdict} [{self.tolerance}] max_abs={self.max_abs:.3e} rel_rms={self.rel_rms:.3e} "
            f"cosine={self.cosine:.8f} nonfinite_agree={self.nonfinite_agree}"
        )


def compare(actual: torch.Tensor, expected: torch.Tensor, tolerance: str = "fp32") -> Comparison:
    """Compare two tensors of the same shape in fp64; non-finite entries must sit in the same places.

    Metrics are taken over the entries where both are finite. rel_rms = rms(actual - expected) / rms(expected)
    (with a floor so an all-zero expectation compares absolutely).
    """
    if actual.shape != expected.shape:
        raise ValueError(f"shape mismatch: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    bound = TOLERANCES[tolerance]
    a = actual.detach().to(torch.float64).cpu().reshape(-1)
    e = expected.detach().to(torch.float64).cpu().reshape(-1)
    finite_a, finite_e = torch.isfinite(a), torch.isfinite(e)
    same_places = bool(torch.equal(finite_a, finite_e))
    # NaN matches NaN and +-Inf must match in sign; map them to distinct finite codes to compare.
    nonfinite_agree = same_places and bool(
        torch.equal(a[~finite_a].nan_to_num(0.0, 1.0, -1.0), e[~finite_e].nan_to_num(0.0, 1.0, -1.0))
    )
    both = finite_a & finite_e
    a, e = a[both], e[both]
    if a.numel() == 0:
        max_abs, rel_rms, cosine = 0.0, 0.0, 1.0
    else:
        diff = a - e
        max_abs = float(diff.abs().max())
        rms_e = float(e.pow(2).mean().sqrt())
        rel_rms = float(diff.pow(2).mean().sqrt()) / max(rms_e, 1e-30)
        norm = float(a.norm() * e.norm())
        cosine = float((a * e).sum()) / norm if norm > 0 else (1.0 if float(diff.abs().max()) == 0 else 0.0)
    passed = nonfinite_agree
    if bound.max_abs is not None:
        passed &= max_abs <= bound.max_abs
    if bound.rel_rms is not None:
        passed &= rel_rms <= bound.rel_rms
    if bound.cosine is not None:
        passed &= cosine >= bound.cosine
    return Comparison(max_abs, rel_rms, cosine, nonfinite_agree, tolerance, bool(passed))


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tolerance: str = "fp32", what: str = "") -> Comparison:
    """`compare`, raising AssertionError with the metrics when the tolerance is not met (for tests)."""
    result = compare(actual, expected, tolerance)
    if not result.passed:
        raise AssertionError(f"{what or 'tensor'}: {result.describe()}")
    return result
