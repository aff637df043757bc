"""The loader: bad tensors are InputErrors naming them; reloading never leaves a derived tensor stale."""

from __future__ import annotations

import math

import pytest
import torch
from dayone.adapters.model import SpecModel, WeightLoader
from dayone.core.errors import InputError
from dayone.core.numerics import assert_close


def _load(spec, tensors, tier="reference"):
    model = SpecModel(spec, tier)
    WeightLoader(spec, tensors.__getitem__).load(model)
    return model


def _name(tensors, suffix):
    return next(n for n in tensors if n.endswith(suffix))


# case -> (the tensor, an entry of its copy, the value put there, the message after the tensor's name: a regex)
CORRUPTED = {
    "nan-weight": ("layers.2.self_attn.q_proj.weight", (1, 2), float("nan"), "contains NaN or Inf"),
    "nonzero-a-log-padding": ("layers.1.self_attn.A_log", -1, 0.5, r"padding entries 2\.\.3 must be zero, index 3 is not"),
    "nan-mxfp4-scale": ("layers.2.block_sparse_moe.experts.5.w2.weight_scale", (0, 0), 255,  # E8M0 NaN
                        "scale bytes give NaN or Inf weights"),
}  # fmt: skip


@pytest.mark.parametrize("case", CORRUPTED)
def test_a_corrupted_tensor_is_named(k3_5, case):
    suffix, entry, value, message = CORRUPTED[case]
    spec, tensors = k3_5
    bad = dict(tensors)
    name = _name(bad, suffix)
    bad[name] = bad[name].clone()
    bad[name][entry] = value
    with pytest.raises(InputError, match=rf"^{name}: {message}$"):
        _load(spec, bad)


def test_wrong_shape_names_tensor_expected_and_got(k3_5):
    spec, tensors = k3_5
    bad = dict(tensors)
    name = _name(bad, "layers.3.self_attn.kv_b_proj.weight")
    expected = list(bad[name].shape)
    bad[name] = bad[name][:, :-1]
    got = list(bad[name].shape)
    with pytest.raises(
        InputError, match=rf"^{name}: shape \[{expected[0]}, {expected[1]}\] expected, got \[{got[0]}, {got[1]}\]$"
    ):
        _load(spec, bad)


def test_missing_tensor_is_named(k3_5):
    spec, tensors = k3_5
    bad = dict(tensors)
    name = _name(bad, "norm.weight")
    del bad[name]
    with pytest.raises(InputError, match=rf"^{name}: missing from the checkpoint$"):
        _load(spec, bad)


def test_mxfp4_finite_check_at_every_scale_byte_and_code():
    """The pair check decides most pairs from the scale bytes alone; at every byte and code it agrees with the value
    the pair stands for, worked out here in Python floats (value * 2^(byte - 127), byte 255 NaN, fp32's largest)."""
    from dayone.adapters.weightmap.quirks import mxfp4_finite
    from dayone.kernels.mxfp4.reference import E2M1_VALUES, E8M0_NAN

    fp32_max = torch.finfo(torch.float32).max
    for byte in range(256):
        scale = torch.full((1, 1), byte, dtype=torch.uint8)
        for code in range(16):
            packed = torch.full((1, 16), code | code << 4, dtype=torch.uint8)  # 32 columns, one scale group
            finite = byte != E8M0_NAN and math.ldexp(E2M1_VALUES[code & 7], byte - 127) <= fp32_max
            assert mxfp4_finite(packed, scale) == finite, (byte, code)


@pytest.mark.parametrize(("code", "finite"), [(0x7, False), (0x1, True)])
def test_mxfp4_scale_byte_253_is_judged_by_its_codes(k3_5, code, finite):
    """Scale byte 253 (2^126): 6.0 overflows fp32, 0.5 does not. The loader refuses the first, loads the second."""
    spec, tensors = k3_5
    bad = dict(tensors)
    name = _name(bad, "layers.2.block_sparse_moe.experts.5.w2.weight_scale")
    packed_name = name.removesuffix("weight_scale") + "weight_packed"
    bad[name], bad[packed_name] = bad[name].clone(), bad[packed_name].clone()
    bad[name][0, 0] = 253
    bad[packed_name][0, :16] = code | code << 4  # the group's 32 codes
    if finite:
        experts = _load(spec, bad).layers[2].ffn.experts
        assert int(experts.down_scale[5, 0, 0]) == 253
    else:
        with pytest.raises(InputError, match=rf"^{name}: scale bytes give NaN or Inf weights$"):
            _load(spec, bad)


def test_a_log_padding_is_stripped_and_experts_dequantized(k3_5):
    spec, tensors = k3_5
    model = _load(spec, tensors)
    a_log = tensors[_name(tensors, "layers.1.self_attn.A_log")]
    assert torch.equal(model.layers[1].self_attn.A_log, a_log[: spec.kda.num_heads])
    from dayone.kernels.mxfp4 import dequantize_mxfp4

    base = _name(tensors, "layers.2.block_sparse_moe.experts.5.w1.weight_packed").removesuffix("weight_packed")
    weight = dequantize_mxfp4(tensors[base + "weight_packed"], tensors[base + "weight_scale"], torch.float32)
    experts = model.layers[2].ffn.experts
    assert experts.quantized and experts.gate_packed.dtype == torch.uint8  # kept packed: 4.25 bits per weight
    assert torch.equal(experts.gate_packed[5], tensors[base + "weight_packed"])
    assert torch.equal(experts.weights(5)[0], weight)


@pytest.mark.parametrize("tier, fixture", [("reference", "k3_25"), ("fast", "k3_5")])
def test_reload_after_noise_is_bitwise_identical(tier, fixture, prompts, request):
    spec, tensors = request.getfixturevalue(fixture)
    model = _load(spec, tensors, tier)
    first = model(*prompts)
    with torch.no_grad():
        for buf in model.state_dict().values():
            buf.copy_(torch.randn(buf.shape))
    model.refresh_derived()
    assert not torch.equal(model(*prompts), first)
    WeightLoader(spec, tensors.__getitem__).load(model)
    assert_close(model(*prompts), first, "exact", "logits after reload")
