"""Synthetic weights: one deterministic draw per tensor, scaled so activations stay well-scaled through every layer.

Each tensor is drawn from its own generator, seeded by (seed, tensor name), so a tensor's values do not depend on
the order it is written in, on the shard layout, or on --layers, and the same seed gives byte-identical files.

How the scales are chosen (D hidden, fan_in the width a matrix reads):
- Every normalised input (input_layernorm, post_attention_layernorm, q_a/kv_a layernorms, the latent norm) has RMS
  ~1 (norm weights 1 + 0.1 N(0, 1)). Projections that read such an input ("in" projections: q/k/v, gates, router,
  gate/up, latent down, q_a/q_b, kv_a/kv_b) get std 1/sqrt(fan_in), so their outputs have RMS ~1 too.
- The projections that write into the residual state ("out" projections: o_proj, down_proj, latent up) set the size
  of each sublayer's contribution, sigma_out. They get std sigma_out / (sqrt(fan_in) * r_in), where r_in is the RMS
  their input has by construction (below).
- Attention residuals: the prefix restarts at every snapshot layer (every block_size layers) and sums at most
  2 * block_size sublayer outputs before it is snapshotted; the embedding (std 1) is the first snapshot.
  sigma_out = BLOCK_PREFIX_RMS / sqrt(2 * block_size) gives a full block's prefix RMS ~0.35 (random contributions
  add in quadrature): every bank row keeps a comparable size, so none drowns the others in layer 1 or layer 92, and
  each sublayer updates the state rather than rewriting it. The factor is measured, not cosmetic. At RMS 1 per
  block the random 93-layer K3 stack is chaotic: a 1e-3 relative perturbation of the embedding grows to 0.2 at the
  last layer in fp32, and bf16 rounding alone puts the fast tier's logits 30% (relative RMS) from the reference's.
  At 0.35 the perturbation grows to 4e-3 and the logits land within ~1.5%, as a trained stack's would. The
  embedding snapshot stays the largest bank row (RMS 1): it anchors every aggregate (an embedding at 0.35 makes
  the perturbation growth six times larger). A late layer's aggregate mixes up to 9 nearly uncorrelated rows and
  has RMS ~0.15-0.5; input_layernorm restores unit RMS before the sublayer reads it.
  Plain residuals: the stream sums 2 * num_layers contributions on top of the embedding, so sigma_out =
  1 / sqrt(2 * num_layers) keeps the last layer's stream at RMS ~sqrt(2) (the GPT-2 scaled-init rule).
- r_in: KDA's o_proj reads RMSNorm_head(o) * sigmoid(gate), gate ~ N(0, 1): RMS of sigmoid(N(0, 1)) ~ 0.54.
  MLA's o_proj reads a softmax mix of unit-RMS value rows, ~0.5 at the sequence lengths validation uses, times the
  same 0.54 when the output gate is on. Gated MLPs feed down_proj act(gate) * up' with RMS ~0.6 for SiLU and SiTU
  alike (SiTU's tanh clamps only far tails at unit RMS).
- MoE: the routed and shared halves each contribute sigma_out / sqrt(2). A latent MoE normalises the weighted
  expert sum (latent norm) before routed_expert_up_proj, so the experts are drawn for unit-RMS outputs and the up
  projection carries sigma. A plain MoE's weighted sum of k experts (renormalised weights times
  routed_scaling_factor) has RMS ~ scaling * sigma_e / sqrt(k), so the experts' down_proj aims at that.
- Attention-residual projections: proj std 0.3/sqrt(D) gives the softmax scores <normalised row, norm * proj> a
  spread of 0.3: mixing weights that differ by tens of percent, so a wrong score (norm, eps, axis) shows in every
  aggregate, without making the mix a sensitive switch (a unit spread doubles the perturbation growth above).
- KDA gate: K3's safe gate lower * sigmoid(exp(A_log) (g + dt_bias)) with A_log ~ log U(0.5, 2) and dt_bias ~ U(-7, -2)
  per channel mixes channels that forget within a few tokens with ones that remember past a 64-token chunk (so the
  chunked kernel's state hand-over matters). The plain gate uses fla's init (A_log = log U(1, 16), dt log-uniform in
  [1e-3, 1e-1]), as transformers does. Short-conv taps std 1/sqrt(width): unit-RMS conv outputs.
- lm_head std 2/sqrt(D): logits with RMS ~2, a next-token distribution peaked enough that log-prob and top-1
  comparisons mean something. Router correction bias 0.05 N(0, 1): it shifts choices without deciding them.
- MXFP4 experts are drawn in fp32 and quantized (dequantize(quantize(w)) is what every tier loads).
- Vision passthrough tensors: small N(0, 0.02^2) matrices and unit norms; nothing here reads them.
"""

from __future__ import annotations

import hashlib
import math

import torch
from dayone.spec.manifest import Tensor
from dayone.spec.schema import ModelSpec

GATED_ACT_RMS = 0.6  # RMS of act(gate) * up' for unit-RMS gate and up (SiLU, SiTU)
SIGMOID_RMS = 0.54  # RMS of sigmoid(N(0, 1)): KDA and MLA output gates
ATTN_MIX_RMS = 0.5  # RMS of a softmax mix of unit-RMS value rows over a few dozen tokens
BLOCK_PREFIX_RMS = 0.35  # RMS of a full block's attention-residual prefix (see above)
RES_SCORE_SPREAD = 0.3  # std of the attention-residual softmax scores
TORCH_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "U8": torch.uint8}


def generator(seed: int, name: str) -> torch.Generator:
    """The generator of one tensor: seeded by a hash of (seed, name), stable across runs and platforms."""
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))


class WeightDraw:
    """Draws the fp32 value of any manifest tensor of `spec` (MXFP4 pairs: the weight before quantization)."""

    def __init__(self, spec: ModelSpec, seed: int) -> None:
        self.spec, self.seed = spec, seed
        D = spec.hidden_size
        if spec.residual.kind == "attention":
            self.sigma_out = BLOCK_PREFIX_RMS / math.sqrt(2 * spec.residual.block_size)  # type: ignore[operator]
        else:
            self.sigma_out = 1 / math.sqrt(2 * spec.num_layers)
        self.D = D

    def __call__(self, t: Tensor, name: str | None = None) -> torch.Tensor:
        """The fp32 value of manifest entry t; `name` overrides the seed name (MXFP4 pairs share one draw)."""
        gen = generator(self.seed, name or t.name)
        role, shape = t.role.removesuffix(".packed").removesuffix(".scale"), t.shape
        if t.role.endswith((".packed", ".scale")):
            group = self.spec.quantization.group_size  # type: ignore[union-attr]
            rows, cols = shape[0], shape[1] * 2 if t.role.endswith(".packed") else shape[1] * group
            shape = (rows, cols)
        special = self._special(role, shape, gen)
        if special is not None:
            return special
        return torch.randn(shape, generator=gen) * self._std(role, shape)

    def _special(self, role: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor | None:
        spec = self.spec
        if role.startswith("passthrough"):
            if len(shape) == 1:
                return torch.ones(shape)
            return 0.02 * torch.randn(shape, generator=gen)
        if role.endswith("norm") and len(shape) == 1:
            return 1 + 0.1 * torch.randn(shape, generator=gen)
        if role == "kda.a_log":
            heads = spec.kda.num_heads  # type: ignore[union-attr]
            if spec.kda.gate.kind == "safe":  # type: ignore[union-attr]
                a_log = torch.empty(heads).uniform_(math.log(0.5), math.log(2.0), generator=gen)
            else:
                a_log = torch.empty(heads).uniform_(1, 16, generator=gen).log()
            flat = torch.zeros(math.prod(shape))
            flat[:heads] = a_log  # the padding past num_heads stays zero, as the release stores it
            return flat.view(shape)
        if role == "kda.dt_bias":
            if spec.kda.gate.kind == "safe":  # type: ignore[union-attr]
                return torch.empty(shape).uniform_(-7.0, -2.0, generator=gen)
            dt = torch.empty(shape).uniform_(math.log(1e-3), math.log(1e-1), generator=gen).exp()
            return dt + torch.log(-torch.expm1(-dt))  # softplus^-1(dt)
        if role.startswith("kda.conv"):
            return torch.randn(shape, generator=gen) / math.sqrt(shape[-1])
        if role == "moe.correction_bias":
            return 0.05 * torch.randn(shape, generator=gen)
        if role == "embed":
            return torch.randn(shape, generator=gen)
        return None

    def _std(self, role: str, shape: tuple[int, ...]) -> float:
        spec, sigma = self.spec, self.sigma_out
        fan_in = shape[-1]
        unit = 1 / math.sqrt(fan_in)
        if role.endswith(".proj") and shape[0] == 1:  # attention-residual [1, D] projections
            return RES_SCORE_SPREAD * unit
        if role == "lm_head":
            return 2 * unit
        if role == "kda.o_proj":
            return sigma * unit / SIGMOID_RMS
        if role == "mla.o_proj":
            r_in = ATTN_MIX_RMS * (SIGMOID_RMS if spec.mla.output_gate else 1.0)  # type: ignore[union-attr]
            return sigma * unit / r_in
        if role == "mlp.down":
            return sigma * unit / GATED_ACT_RMS
        moe = spec.moe
        if moe is not None:
            halves = math.sqrt(2) if moe.num_shared_experts else 1.0
            if role == "moe.shared.down":
                return sigma / halves * unit / GATED_ACT_RMS
            if role == "moe.latent_up":
                return sigma / halves * unit
            if role == "moe.expert.down":
                k, scaling = moe.experts_per_token, moe.router.scaling_factor
                # unit-RMS weighted sum for a latent MoE (its norm or up projection sets the size), sigma/halves else
                target = 1.0 if moe.latent_size is not None else sigma / halves
                return target * math.sqrt(k) / scaling * unit / GATED_ACT_RMS
        return unit
