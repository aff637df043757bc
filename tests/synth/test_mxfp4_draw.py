"""MXFP4 experts drawn as codes and scales (dayone.synth.mxfp4_draw) against the independent way of making them:
a Gaussian weight drawn in fp32 and quantized by the reference quantizer (dayone.kernels.mxfp4.reference). The two
cannot agree byte for byte (different draws); their distributions must: every code's share, every scale byte's share,
the dequantized weight's RMS, and the quantizer's own invariant that each group's largest element is 4 or 6 scaled."""

from __future__ import annotations

import pytest
import torch
from dayone.kernels.mxfp4.reference import GROUP_SIZE, dequantize_mxfp4_reference, quantize_mxfp4
from dayone.synth.mxfp4_draw import draw_mxfp4

ROWS, COLS = 512, 4096  # 2M elements, 65536 groups: shares to about 1e-3


def _quantized_gaussian(std: float) -> tuple[torch.Tensor, torch.Tensor]:
    return quantize_mxfp4(torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(7)) * std)


def _shares(values: torch.Tensor, size: int) -> torch.Tensor:
    return torch.bincount(values.flatten().long(), minlength=size).double() / values.numel()


def _codes(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack((packed & 0x0F, packed >> 4), dim=-1)


@pytest.mark.parametrize("std", [1.0, 0.0312, 0.0055])  # unit, an up projection's, a latent down projection's
def test_the_draw_has_the_quantized_gaussians_distribution(std):
    packed, scale = draw_mxfp4(ROWS, COLS, std, torch.Generator().manual_seed(0))
    want_packed, want_scale = _quantized_gaussian(std)
    assert packed.shape == want_packed.shape and scale.shape == want_scale.shape
    assert packed.dtype == scale.dtype == torch.uint8
    code_gap = (_shares(_codes(packed), 16) - _shares(_codes(want_packed), 16)).abs().max()
    assert code_gap < 2e-3, code_gap
    scale_gap = (_shares(scale, 256) - _shares(want_scale, 256)).abs().max()
    assert scale_gap < 5e-3, scale_gap
    drawn, quantized = (dequantize_mxfp4_reference(p, s, torch.float32) for p, s in ((packed, scale),
                                                                                     (want_packed, want_scale)))  # fmt: skip
    assert drawn.pow(2).mean().sqrt() == pytest.approx(float(quantized.pow(2).mean().sqrt()), rel=0.01)
    assert drawn.mean().abs() < 0.01 * std


def test_every_groups_largest_element_is_four_or_six_scaled_as_quantization_leaves_it():
    packed, _ = draw_mxfp4(ROWS, COLS, 0.02, torch.Generator().manual_seed(1))
    largest = (_codes(packed) & 0x07).reshape(ROWS, COLS // GROUP_SIZE, GROUP_SIZE).amax(-1)
    assert set(largest.unique().tolist()) <= {6, 7}  # E2M1 indices of 4.0 and 6.0
    assert (largest == 7).any() and (largest == 6).any()


def test_one_generator_state_one_draw():
    first = draw_mxfp4(64, 256, 0.1, torch.Generator().manual_seed(3))
    again = draw_mxfp4(64, 256, 0.1, torch.Generator().manual_seed(3))
    other = draw_mxfp4(64, 256, 0.1, torch.Generator().manual_seed(4))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def test_columns_must_fill_whole_groups():
    with pytest.raises(ValueError, match="multiple of 32"):
        draw_mxfp4(4, 48, 1.0, torch.Generator())
