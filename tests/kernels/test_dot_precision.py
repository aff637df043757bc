"""TF32 in the dots, checked without a GPU.

A GPU multiplies fp32 tiles in TF32 (10 mantissa bits) unless a tl.dot asks for input_precision="ieee"; the
interpreter computes every dot in fp32 whatever it is asked, so a kernel whose fp32 dots fell to TF32 would pass
every interpreter test and fail on a GPU. Here, on the CPU, the interpreter's dot rounds its inputs to TF32 (to
nearest even, with Triton's own rounding helper) whenever the kernel asks for TF32, Triton's default; on a GPU the
tensor cores do it for real. The kernels choose per dtype (docs/kernels.md): fp32 inputs must still meet the fp32
reference, bf16 inputs the bf16 row.
"""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from dayone.core.numerics import assert_close, compare
from dayone.kernels.kda import chunk_kda
from dayone.kernels.kda.reference import kda_reference


@pytest.fixture
def tf32_dots(device, monkeypatch):
    """Dots that ask for TF32 round their fp32 inputs to TF32 in the interpreter (on a GPU they already do)."""
    if device == "cuda":
        return
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if str(input_precision).upper().endswith(".TF32") and a.data.dtype == np.float32:
            a = interpreter.TensorHandle(interpreter._round_f32_to_tf32(a.data), a.dtype.scalar)
            b = interpreter.TensorHandle(interpreter._round_f32_to_tf32(b.data), b.dtype.scalar)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", create_dot)


@triton.jit
def matmul_kernel(a, b, c, N: tl.constexpr, IEEE: tl.constexpr):
    rows = tl.arange(0, N)
    offs = rows[:, None] * N + rows[None, :]
    if IEEE:
        prod = tl.dot(tl.load(a + offs), tl.load(b + offs), input_precision="ieee")
    else:
        prod = tl.dot(tl.load(a + offs), tl.load(b + offs))  # Triton's default: TF32
    tl.store(c + offs, prod)


@pytest.mark.parametrize("ieee", [False, True])
def test_a_default_fp32_dot_misses_the_fp32_row_and_an_ieee_one_meets_it(device, tf32_dots, ieee):
    # The check bites: without IEEE, a plain 32 x 32 fp32 product is off by TF32's rounding (~1e-4 relative).
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(32, 32, generator=gen), torch.randn(32, 32, generator=gen)
    c = torch.empty(32, 32, device=device)
    matmul_kernel[(1,)](a.to(device), b.to(device), c, N=32, IEEE=ieee, enable_fp_fusion=True)  # as our launches do
    assert compare(c, a.double().matmul(b.double()).float(), "fp32_kernel").passed == ieee


@pytest.mark.parametrize(
    "dtype,row", [(torch.float32, "fp32_kernel"), (torch.bfloat16, "bf16_kernel")], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("gate", ["plain", "safe"])
def test_chunk_kda_meets_its_row_with_tf32_dots(device, tf32_dots, dtype, row, gate):
    gen = torch.Generator().manual_seed(1)
    T, H, K, V = 80, 1, 32, 32
    x = {
        "q": torch.randn(1, T, H, K, generator=gen).to(dtype),
        "k": torch.randn(1, T, H, K, generator=gen).to(dtype),
        "v": torch.randn(1, T, H, V, generator=gen).to(dtype),
        "g": torch.randn(1, T, H, K, generator=gen).to(dtype),
        "beta": torch.randn(1, T, H, generator=gen).to(dtype),
        "A_log": torch.randn(H, generator=gen) * 0.5,
        "dt_bias": torch.randn(H * K, generator=gen),
    }
    cu, h0 = torch.tensor([0, 7, 80]), torch.randn(2, H, K, V, generator=gen)
    ro, rht = kda_reference(**x, gate=gate, initial_state=h0, cu_seqlens=cu)
    o, ht = chunk_kda(
        **{n: t.to(device) for n, t in x.items()}, gate=gate, initial_state=h0.to(device), cu_seqlens=cu.to(device),
        backend="triton",
    )  # fmt: skip
    assert_close(o, ro, row, what=f"o {dtype} {gate}")
    assert_close(ht, rht, row, what=f"final state {dtype} {gate}")
