"""What the compile stage needs from kda: the chunk (prepare, output) and decode/verify instances at the spec's head dim
and gate, the output and decode kernels' autotuning configs, and their launch inputs (dayone.compile_stage imports
this module; the public op does not). `training_specializations`: the backward's kernel instances (chunk_backward.py),
which a trainer's GPU runs and an inference engine does not, so the compile stage does not build them."""

from __future__ import annotations

from functools import lru_cache, partial

import torch
import triton
from dayone.kernels.autotune import DECODE_BATCH, PREFILL_TOKENS, TORCH_DTYPES, Candidate, Inputs, LaunchArgs, variants
from dayone.kernels.kda.chunk import (
    CHUNK,
    GATES,
    chunk_plan,
    kda_chunk_output_kernel,
    kda_chunk_prepare_kernel,
    tile_width,
)
from dayone.kernels.kda.chunk import pick_block_v as chunk_block_v
from dayone.kernels.kda.chunk_backward import kda_chunk_backward_kernel, kda_chunk_states_kernel
from dayone.kernels.kda.chunk_backward import pick_block_v as backward_block_v
from dayone.kernels.kda.chunk_backward_intra import (
    BLOCK_K,
    NUM_WARPS,
    WY_BLOCK,
    kda_chunk_intra_backward_kernel,
    kda_chunk_wy_backward_kernel,
)
from dayone.kernels.kda.recurrent import kda_decode_kernel
from dayone.kernels.kda.recurrent import pick_block_v as decode_block_v
from dayone.kernels.specialization import KernelDims, Specialization

# Register spills of the chunk and decode kernels (ptxas -v: spill stores + spill loads, bytes per thread), by kernel
# and K tile: the largest over sm_90 and sm_100, both gates, and K = V = the tile (at 128 and 256 also 96 and 192,
# which share those tiles), measured with `integrate compile` (Triton 3.9; K3 and Kimi Linear are K = 128). The chunk
# kernels hold [64, tile] fp32 tiles of a whole head live at 255 registers, more than a thread has. These figures are
# the instances' spill budget (Specialization.known_spill_bytes), so a change that spills more fails the compile;
# removing the spills needs the tiles split, and a GPU to tell whether that pays (issue 17). Tile 16 spills nothing.
KNOWN_SPILLS = {
    ("chunk_output", 32): 80,  # K = 32, sm_90: 48 stored + 32 loaded, stack frame 32 B
    ("chunk_output.h0", 32): 72,  # K = 32, sm_90: 36 stored + 36 loaded, stack frame 40 B
    ("chunk_output", 64): 872,  # K = 64, sm_100: 360 stored + 512 loaded, stack frame 336 B
    ("chunk_output.h0", 64): 1556,  # K = 64, sm_90: 728 stored + 828 loaded, stack frame 728 B
    ("chunk_prepare.plain", 64): 396,  # K = 64, sm_90: 180 stored + 216 loaded, stack frame 184 B
    ("chunk_prepare.safe", 64): 432,  # K = 64, sm_90: 192 stored + 240 loaded, stack frame 192 B
    ("chunk_output", 128): 2884,  # K = 96, sm_100: 1424 stored + 1460 loaded, stack frame 1376 B
    ("chunk_output.h0", 128): 4368,  # K = 96, sm_90: 2124 stored + 2244 loaded, stack frame 1992 B
    ("chunk_prepare.plain", 128): 7232,  # K = 96, sm_90: 3332 stored + 3900 loaded, stack frame 1664 B
    ("chunk_prepare.safe", 128): 6528,  # K = 96, sm_90: 3012 stored + 3516 loaded, stack frame 1664 B
    ("chunk_output", 256): 8488,  # K = 256, sm_100: 3840 stored + 4648 loaded, stack frame 2432 B
    ("chunk_output.h0", 256): 12340,  # K = 192, sm_90: 5760 stored + 6580 loaded, stack frame 4104 B
    ("chunk_prepare.plain", 256): 32416,  # K = 256, sm_100: 14420 stored + 17996 loaded, stack frame 4872 B
    ("chunk_prepare.safe", 256): 29852,  # K = 192, sm_100: 12760 stored + 17092 loaded, stack frame 4056 B
    # the decode kernels keep a [256, 32] fp32 state block per program at tile 256 (none spills at 128 or below)
    ("decode.plain", 256): 304,  # K = 256, sm_100: 152 stored + 152 loaded, stack frame 152 B
    ("decode.plain.verify", 256): 512,  # K = 256, sm_90: 256 + 256, stack frame 256 B
    ("decode.safe", 256): 288,  # K = 256, sm_90 and sm_100: 144 + 144, stack frame 144 B
    ("decode.safe.verify", 256): 504,  # K = 256, sm_90: 252 + 252, stack frame 256 B
}


def specializations(dims: KernelDims) -> list[Specialization]:
    """The KDA kernel instances a model needs: its gate form, bf16 activations, chunk 64, at its head dim.

    Dims without a gate (kda_gate="", built by hand rather than from a spec) get both gate forms.
    """
    if dims.kda_num_heads == 0:
        return []
    K = V = dims.kda_head_dim
    act = "*" + dims.dtype
    flags = {"L2NORM": True, "BETA_SIGMOID": True}
    io = {"q": act, "k": act, "v": act, "g": act, "beta": act, "A_log": "*fp32", "dt_bias": "*fp32"}
    prepare = {
        **io, "cu_seqlens": "*i32", "chunk_indices": "*i32",
        **dict.fromkeys(["qg", "kg", "w", "u", "Aqk", "gl"], "*fp32"),
        "scale": "fp32", "lower_bound": "fp32", "H": "i32",
        **dict.fromkeys(["K", "V", "BT", "BK", "BV", "GATE", "L2NORM", "BETA_SIGMOID"], "constexpr"),
    }  # fmt: skip
    output = {
        **dict.fromkeys(["qg", "kg", "w", "u", "Aqk", "gl"], "*fp32"), "o": act, "h0": "*fp32", "ht": "*fp32",
        "cu_seqlens": "*i32", "chunk_offsets": "*i32", "H": "i32",
        **dict.fromkeys(["K", "V", "BT", "BK", "BV", "HAS_INITIAL", "STORE_FINAL"], "constexpr"),
    }  # fmt: skip
    decode = {
        **io, "state_pool": "*fp32", "slots": "*i32", "o": act, "inter": "*fp32",
        "scale": "fp32", "lower_bound": "fp32", "T": "i32", "H": "i32",
        **dict.fromkeys(["K", "V", "BK", "BV", "GATE", "L2NORM", "BETA_SIGMOID", "VERIFY"], "constexpr"),
    }  # fmt: skip

    def known_spills(kernel: str) -> int:
        return KNOWN_SPILLS.get((kernel.removeprefix("kda."), tile_width(K)), 0)

    specs = []
    for name in (dims.kda_gate,) if dims.kda_gate else ("plain", "safe"):
        gate = GATES[name]
        kernel = f"kda.chunk_prepare.{name}"
        specs.append(
            Specialization(
                kernel,
                kda_chunk_prepare_kernel,
                prepare,
                dict(K=K, V=V, BT=CHUNK, BK=tile_width(K), BV=tile_width(V), GATE=gate, **flags),
                num_warps=8,
                known_spill_bytes=known_spills(kernel),
            )
        )
        for verify in (False, True):
            kernel = f"kda.decode.{name}" + (".verify" if verify else "")
            specs.append(
                Specialization(
                    kernel,
                    kda_decode_kernel,
                    decode,
                    dict(K=K, V=V, BK=tile_width(K), BV=decode_block_v(V), GATE=gate, VERIFY=verify, **flags),
                    num_warps=4,
                    known_spill_bytes=known_spills(kernel),
                )
            )
    for has_initial in (False, True):
        kernel = "kda.chunk_output" + (".h0" if has_initial else "")
        specs.append(
            Specialization(
                kernel,
                kda_chunk_output_kernel,
                output,
                {"K": K, "V": V, "BT": CHUNK, "BK": tile_width(K), "BV": chunk_block_v(V)}
                | {"HAS_INITIAL": has_initial, "STORE_FINAL": True},
                num_warps=4,
                num_stages=1,
                known_spill_bytes=known_spills(kernel),
            )
        )
    return specs


# The backward's spills, as KNOWN_SPILLS (bytes of spill stores + loads per thread, the largest over sm_90 and sm_100
# and the head dims sharing a tile, dayone.kernels.aot at BV = 32, Triton 3.9; measured at K = V = 16, 32, 48, 64, 96,
# 128, 192, 256). The backward kernel keeps the state, its gradient and [64, K] products at 255 registers from tile 32
# up; the states walk spills only at tile 256. At K = 48 sm_100's ptxas gave the backward 56 registers and an 11 KB
# spill (K = 64 there: 255 registers, 1.5 KB), which sets tile 64's figure.
TRAINING_KNOWN_SPILLS = {
    ("chunk_backward", 32): 512,  # K = 32, sm_100: 248 stored + 264 loaded
    ("chunk_backward.ht", 32): 588,  # K = 32, sm_100: 268 + 320
    ("chunk_backward", 64): 11316,  # K = 48, sm_100: 4824 + 6492 (K = 64: 1780 on sm_90)
    ("chunk_backward.ht", 64): 11360,  # K = 48, sm_100: 4848 + 6512 (K = 64: 1972 on sm_90)
    ("chunk_backward", 128): 1260,  # K = 96, sm_100: 556 + 704 (K = 128: 676 on sm_90)
    ("chunk_backward.ht", 128): 1648,  # K = 96, sm_100: 716 + 932 (K = 128: 816 on sm_90)
    ("chunk_states", 256): 1508,  # K = 256, sm_100
    ("chunk_states.h0", 256): 1516,  # K = 256, sm_100
    ("chunk_backward", 256): 4400,  # K = 192, sm_100: 1476 + 2924
    ("chunk_backward.ht", 256): 5132,  # K = 256, sm_100
}
# The in-chunk backward takes 16 channels a program whatever the head dim: 255 registers and 112 B stored + 112 B
# loaded on sm_90 (20 + 20 on sm_100) at every K measured.
INTRA_BACKWARD_KNOWN_SPILLS = 224


def training_specializations(dims: KernelDims) -> list[Specialization]:
    """The backward's instances at the spec's head dim: the states walk with and without initial states, the backward
    walk with and without a final-state gradient (training sends none), the in-chunk products' backward and the WY
    form's. Their
    inputs are the fp32 WY intermediates whatever the model's dtype; the dots are TF32 (IEEE=False) for a 16-bit
    model, IEEE for an fp32 one, as the forward's. Spill budgets: TRAINING_KNOWN_SPILLS, INTRA_BACKWARD_KNOWN_SPILLS."""
    if dims.kda_num_heads == 0:
        return []
    K = V = dims.kda_head_dim
    shape = {"K": K, "V": V, "BT": CHUNK, "BK": tile_width(K), "BV": backward_block_v(V), "IEEE": dims.dtype == "fp32"}
    states = {
        **dict.fromkeys(["w", "u", "kg", "gl", "h0", "h"], "*fp32"), "chunk_offsets": "*i32", "H": "i32",
        **dict.fromkeys(["K", "V", "BT", "BK", "BV", "HAS_INITIAL", "IEEE"], "constexpr"),
    }  # fmt: skip
    backward = {
        **dict.fromkeys(["qg", "kg", "w", "u", "Aqk", "gl", "h", "do", "dht", "dh0"], "*fp32"),
        **dict.fromkeys(["dqg", "dkg", "dw", "du", "dAqk", "dgl"], "*fp32"), "chunk_offsets": "*i32",
        "H": "i32", "C": "i32",
        **dict.fromkeys(["K", "V", "BT", "BK", "BV", "HAS_FINAL_GRAD", "IEEE"], "constexpr"),
    }  # fmt: skip
    instances = [
        (name + suffix, fn, signature, {flag: value})
        for value in (False, True)
        for name, fn, signature, flag, suffix in (
            ("kda.chunk_states", kda_chunk_states_kernel, states, "HAS_INITIAL", ".h0" if value else ""),
            ("kda.chunk_backward", kda_chunk_backward_kernel, backward, "HAS_FINAL_GRAD", ".ht" if value else ""),
        )
    ]
    intra = {
        **dict.fromkeys(["q", "k", "g", "dAqk", "dAkk", "dq", "dk", "dg"], "*fp32"), "H": "i32",
        **dict.fromkeys(["K", "BT", "BK", "IEEE"], "constexpr"),
    }  # fmt: skip
    intra_shape = {"K": K, "BT": CHUNK, "BK": BLOCK_K, "IEEE": shape["IEEE"]}
    wy = {
        **dict.fromkeys(["M", "Ak", "beta", "keg", "v", "dw", "du", "dAk", "dbeta", "dkeg", "dv"], "*fp32"), "H": "i32",
        **dict.fromkeys(["K", "V", "BT", "BK", "IEEE"], "constexpr"),
    }  # fmt: skip
    wy_shape = {"K": K, "V": V, "BT": CHUNK, "BK": WY_BLOCK, "IEEE": shape["IEEE"]}
    return [
        Specialization(n, fn, sig, shape | flag, num_warps=4, num_stages=1,
                       known_spill_bytes=TRAINING_KNOWN_SPILLS.get((n.removeprefix("kda."), tile_width(K)), 0))
        for n, fn, sig, flag in instances
    ] + [
        Specialization("kda.chunk_intra_backward", kda_chunk_intra_backward_kernel, intra, intra_shape,
                       num_warps=NUM_WARPS, num_stages=1,
                       known_spill_bytes=INTRA_BACKWARD_KNOWN_SPILLS),
        Specialization("kda.chunk_wy_backward", kda_chunk_wy_backward_kernel, wy, wy_shape, num_warps=4, num_stages=1),
    ]  # fmt: skip


# Autotuning alternatives to the shipped configs. At K = V = 128 on sm_90 (ptxas -v) the wider decode configs spill
# (up to ~1.5 KB a thread, over their budget of 0), and autotune drops them at AOT, untimed (test_autotune); the
# output kernel's configs spill within its tile's KNOWN_SPILLS figure. Two pipeline stages of the output kernel do
# not fit (~240-290 KiB of shared memory), so they are offered at K <= 64 only.
CHUNK_OUTPUT_CONFIGS = (
    {"BV": 32}, {"BV": 16}, {"BV": 32, "num_warps": 8}, {"BV": 64, "num_warps": 8}, {"BV": 128, "num_warps": 8},
)  # fmt: skip
CHUNK_OUTPUT_SMALL_HEAD_CONFIGS = ({"BV": 16, "num_stages": 2}, {"BV": 32, "num_stages": 2})
DECODE_CONFIGS = (
    {"BV": 16}, {"BV": 16, "num_warps": 2}, {"BV": 64}, {"BV": 64, "num_warps": 8}, {"BV": 128, "num_warps": 8},
)  # fmt: skip
LOWER_BOUND = -5.0  # K3's safe gate bound (spec kda.gate.lower_bound), a runtime scalar
# make_args(tiny=True): small enough for the interpreter; V = 96 is no power of two, so the last V block of every BV
# above but 16 and 32 hangs over it and is masked.
TINY_HEADS, TINY_K, TINY_V = 2, 16, 96


def candidates(dims: KernelDims) -> list[Candidate]:
    """Chunk output kernel (BV, warps, stages) at prefill T = 8192; plain decode (BV, warps) at batch 64."""
    shipped = {spec.kernel: spec for spec in specializations(dims)}
    if not shipped:
        return []
    V = dims.kda_head_dim

    def fits(change: dict) -> bool:  # a V block wider than the V tile would only compute padding
        return change.get("BV", 0) <= tile_width(V)

    output_changes = CHUNK_OUTPUT_CONFIGS + (CHUNK_OUTPUT_SMALL_HEAD_CONFIGS if dims.kda_head_dim <= 64 else ())
    found = []
    for has_initial in (False, True):
        default = shipped["kda.chunk_output" + (".h0" if has_initial else "")]
        found.append(
            Candidate(
                variants(default, filter(fits, output_changes)),
                partial(chunk_output_args, dims, has_initial),
                ("o", "ht"),
            )
        )
    for gate in (dims.kda_gate,) if dims.kda_gate else ("plain", "safe"):
        default = shipped[f"kda.decode.{gate}"]
        found.append(
            Candidate(variants(default, filter(fits, DECODE_CONFIGS)), partial(decode_args, dims), ("o", "state_pool"))
        )
    return found


def _kda_inputs(x: Inputs, T: int, H: int, K: int, V: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """q, k, v, raw gate, beta logits [1 or N, T, H, *] and the gate's A_log [H], dt_bias [H * K]."""
    width = {"q": K, "k": K, "v": V, "g": K}
    inputs = {name: x.randn(1, T, H, n, dtype=dtype) for name, n in width.items()}
    return inputs | {"beta": x.randn(1, T, H, dtype=dtype), "A_log": x.randn(H, scale=0.5), "dt_bias": x.randn(H * K)}


@lru_cache(maxsize=1)
def _prepared(dims: KernelDims, device: str, tiny: bool) -> tuple[list[int], tuple[torch.Tensor, ...]]:
    """The prepare kernel's outputs for chunk_output_args, read-only to the output kernel, so made once for all
    configs of both output instances (the prepare kernel is most of a tiny run's time in the interpreter)."""
    H, K, V = (TINY_HEADS, TINY_K, TINY_V) if tiny else (dims.kda_num_heads, dims.kda_head_dim, dims.kda_head_dim)
    bounds = [0, 70, 100] if tiny else [0, PREFILL_TOKENS]
    T = bounds[-1]
    x = Inputs(device)
    inp = _kda_inputs(x, T, H, K, V, torch.float32 if tiny else TORCH_DTYPES[dims.dtype])
    indices, offsets = chunk_plan(bounds)
    cu, chunk_indices, chunk_offsets = x.tensor(bounds), x.tensor(indices), x.tensor(offsets)
    qg, kg, w = (x.nans(1, T, H, K) for _ in range(3))
    u, Aqk, gl = x.nans(1, T, H, V), x.nans(1, T, H, CHUNK), x.nans(len(indices), H, K)
    kda_chunk_prepare_kernel[(len(indices), H)](
        *inp.values(), cu, chunk_indices, qg, kg, w, u, Aqk, gl, K**-0.5, LOWER_BOUND, H,
        K=K, V=V, BT=CHUNK, BK=tile_width(K), BV=tile_width(V), GATE=GATES[dims.kda_gate or "safe"], L2NORM=True,
        BETA_SIGMOID=True, num_warps=8, enable_fp_fusion=True,
    )  # fmt: skip
    return bounds, (qg, kg, w, u, Aqk, gl, cu, chunk_offsets)


def chunk_output_args(dims: KernelDims, has_initial: bool, device: str, tiny: bool = False) -> LaunchArgs:
    """The output kernel's launch for one prefill sequence of 8192 tokens, its inputs made by the prepare kernel.

    tiny: two packed sequences of 70 and 30 tokens (a chunk and a remainder, then a short one), 2 heads, K = 16,
    V = 96, fp32.
    """
    H, K, V = (TINY_HEADS, TINY_K, TINY_V) if tiny else (dims.kda_num_heads, dims.kda_head_dim, dims.kda_head_dim)
    bounds, (qg, kg, w, u, Aqk, gl, cu, chunk_offsets) = _prepared(dims, device, tiny)
    T, N = bounds[-1], len(bounds) - 1
    x = Inputs(device, seed=1)
    o, ht = x.nans(1, T, H, V, dtype=torch.float32 if tiny else TORCH_DTYPES[dims.dtype]), x.nans(N, H, K, V)
    h0 = x.randn(N, H, K, V) if has_initial else ht
    grid = lambda meta: (triton.cdiv(V, meta["BV"]), N, H)
    args = (qg, kg, w, u, Aqk, gl, o, h0, ht, cu, chunk_offsets, H)
    return grid, args, {"K": K, "V": V, "BK": tile_width(K)} if tiny else {}


def decode_args(dims: KernelDims, device: str, tiny: bool = False) -> LaunchArgs:
    """Plain decode of 64 requests, one token each, each in its own slot of a 64-state pool.

    tiny: 3 requests (slots 2, padding, 0) of 2 heads, K = 16, V = 96, fp32.
    """
    H, K, V = (TINY_HEADS, TINY_K, TINY_V) if tiny else (dims.kda_num_heads, dims.kda_head_dim, dims.kda_head_dim)
    dtype = torch.float32 if tiny else TORCH_DTYPES[dims.dtype]
    slots = [2, -1, 0] if tiny else list(range(DECODE_BATCH))
    N = len(slots)
    x = Inputs(device)
    inp = _kda_inputs(x, N, H, K, V, dtype)  # [1, N, ...] is [N, T = 1, ...] in memory
    pool = x.randn(N, H, K, V)
    o = x.nans(N, 1, H, V, dtype=dtype)
    grid = lambda meta: (triton.cdiv(V, meta["BV"]), N, H)
    args = (*inp.values(), pool, x.tensor(slots), o, x.nans(1), K**-0.5, LOWER_BOUND, 1, H)
    return grid, args, {"K": K, "V": V, "BK": tile_width(K)} if tiny else {}
