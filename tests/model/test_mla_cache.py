"""MLA's paged latent cache: decode through the page table matches attention over the whole sequence, pages are
handed out interleaved across requests, and a decode step within the reserved pages moves no cached byte."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from dayone.adapters.model import SpecModel, WeightLoader
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.mla import MLA
from dayone.adapters.model.norms import rms_norm
from dayone.core.numerics import assert_close

LENGTHS = [9, 5, 1]  # prompt tokens per request
STEPS = 7  # decode steps: every request crosses at least one 4-token page boundary


def _mla_layers(spec, tensors):
    """The first MLA layer of the model in both tiers, same checkpoint."""
    out = {}
    for tier in ("reference", "fast"):
        model = SpecModel(spec, tier)
        WeightLoader(spec, tensors.__getitem__).load(model)
        out[tier] = next(layer.self_attn for layer in model.layers if isinstance(layer.self_attn, MLA))
    return out["reference"], out["fast"]


def _inputs(spec, seed=0):
    """Per request: prompt + STEPS tokens of normalized hidden states [n, D]."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n + STEPS, spec.hidden_size, generator=gen) for n in LENGTHS]


def _prefill_then_decode(mla: MLA, xs, state):
    """Packed prefill of every prompt, then STEPS one-token steps; per request the outputs of all its tokens."""
    dtype = mla.tier.dtype
    with torch.inference_mode():
        prompts = torch.cat([x[:n] for x, n in zip(xs, LENGTHS)]).to(dtype)
        out = mla(prompts, Batch(tuple(LENGTHS), (0,) * len(LENGTHS)), state)
        rows = list(out.split(LENGTHS))
        for t in range(STEPS):
            step = torch.stack([x[n + t] for x, n in zip(xs, LENGTHS)]).to(dtype)
            past = tuple(n + t for n in LENGTHS)
            y = mla(step, Batch((1,) * len(LENGTHS), past), state)
            rows = [torch.cat([r, y[b : b + 1]]) for b, r in enumerate(rows)]
    return rows


def _full(mla: MLA, xs):
    with torch.inference_mode():
        return [mla(x.to(mla.tier.dtype), Batch((x.shape[0],), (0,)), None) for x in xs]


@pytest.mark.parametrize("page_size", [4, 64])
def test_paged_decode_matches_full_attention(k3_5, page_size):
    """Fast tier, prefill + paged decode (small pages: boundaries and pool growth inside the run) against the fp32
    reference tier attending over each whole sequence at once; and the reference tier's own cached run against it."""
    spec, tensors = k3_5
    ref, fast = _mla_layers(spec, tensors)
    xs = _inputs(spec)
    expected = _full(ref, xs)
    state = fast.new_state(len(LENGTHS), page_size=page_size)
    got = _prefill_then_decode(fast, xs, state)
    for b in range(len(LENGTHS)):
        assert_close(got[b].float(), expected[b], "bf16_model", f"fast paged decode, request {b}")
    assert state.lengths == [n + STEPS for n in LENGTHS] and state.seq_lens.tolist() == state.lengths
    if page_size == 4:
        assert state.growths >= 1  # the pool grew mid-run and kept every cached row
    cached = _prefill_then_decode(ref, xs, ref.new_state(len(LENGTHS), page_size=page_size))
    for b in range(len(LENGTHS)):
        assert_close(cached[b], expected[b], "fp32", f"reference cached run, request {b}")


def test_pages_interleave_and_hold_each_requests_tokens(k3_5):
    """Pages go to whichever request needs one next (as an engine's allocator), so a request's pages are not one
    contiguous block; reading a request through its page table gives its own latents in token order."""
    spec, tensors = k3_5
    ref, _ = _mla_layers(spec, tensors)
    xs = _inputs(spec)
    state = ref.new_state(len(LENGTHS), page_size=4)
    _prefill_then_decode(ref, xs, state)
    pages = [state.page_table[b, : state.owned[b]].tolist() for b in range(len(LENGTHS))]
    assert sorted(p for ps in pages for p in ps) == list(range(state.used_pages))  # each page owned once
    assert any(ps != list(range(ps[0], ps[0] + len(ps))) for ps in pages)  # decode pages interleave
    with torch.inference_mode():
        for b, x in enumerate(xs):
            latents = state.tokens(b)
            assert latents.shape == (LENGTHS[b] + STEPS, ref.C + ref.R)
            # the latent of a token depends on that token alone: recompute it from the input and compare
            c, k_rope = torch.nn.functional.linear(x, ref.kv_a_proj_with_mqa).split([ref.C, ref.R], dim=-1)
            expected = torch.cat([rms_norm(c, ref.kv_a_layernorm, ref.eps), k_rope], dim=-1)
            assert_close(latents, expected, "fp32", f"cached latents of request {b}")


def test_decode_within_reserved_pages_moves_nothing(k3_5):
    """With the pages reserved up front the pool, the page table and seq_lens keep their storage through every
    decode step, and the rows cached before a step are untouched by it (the new row is written in place)."""
    spec, tensors = k3_5
    _, fast = _mla_layers(spec, tensors)
    xs = _inputs(spec)
    state = fast.new_state(len(LENGTHS), page_size=4, capacity_tokens=max(LENGTHS) + STEPS)
    pointers = (state.pool.data_ptr(), state.page_table.data_ptr(), state.seq_lens.data_ptr())
    snapshots = []

    def step_hook(module, args):
        snapshots.append([state.tokens(b).clone() for b in range(len(LENGTHS))])

    handle = fast.register_forward_pre_hook(step_hook)
    try:
        _prefill_then_decode(fast, xs, state)
    finally:
        handle.remove()
    assert (state.pool.data_ptr(), state.page_table.data_ptr(), state.seq_lens.data_ptr()) == pointers
    assert state.growths == 0
    final = [state.tokens(b) for b in range(len(LENGTHS))]
    for before in snapshots:
        for b, rows in enumerate(before):
            assert torch.equal(final[b][: rows.shape[0]], rows)  # copies of stored bytes: equal by construction


def test_unreserved_pool_grows_by_doubling(k3_5):
    """Without a reservation the pool reallocates O(log T) times over T decode steps, not once per step."""
    spec, tensors = k3_5
    _, fast = _mla_layers(spec, tensors)
    state = fast.new_state(2, page_size=4)
    steps = 200
    with torch.inference_mode():
        for t in range(steps):
            x = torch.randn(2, spec.hidden_size, generator=torch.Generator().manual_seed(t)).bfloat16()
            fast(x, Batch((1, 1), (t, t)), state)
    pages = 2 * math.ceil(steps / 4)
    assert state.used_pages == pages
    assert 1 <= state.growths <= math.ceil(math.log2(pages / 2))


def test_decode_benchmark_runs():
    """benchmarks/mla_decode_cache.py at small contexts (Kimi Linear's MLA widths): every part timed, the cache write
    a small fraction of the layer step."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "mla_decode_cache.py"
    args = ["--spec", "kimi-linear-48b-a3b", "--batch", "2", "--contexts", "32,256", "--steps", "3", "--json"]
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["contexts"] == [32, 256]
    for seconds in report["seconds"].values():
        assert set(seconds) == {"layer", "cache write", "attention", "concat+repack"}
        assert 0 < seconds["cache write"] < seconds["layer"]
