"""MLA decode: absorbed reference against plain attention on expanded keys (SDPA), batched torch path and the
Triton kernel (on the test device) against the reference, over ragged lengths and page boundaries."""

import pytest
import torch
import torch.nn.functional as F
from dayone.core.numerics import assert_close
from dayone.kernels.mla_decode import mla_attention_reference, mla_decode, mla_decode_reference
from dayone.kernels.mla_decode.aot import specializations
from dayone.kernels.mla_decode.reference import gather_request_tokens
from dayone.kernels.specialization import KernelDims

LATENT, ROPE = 32, 16  # small stand-ins for 512 and 64


def paged_cache(
    seq_lens: list[int], page_size: int, num_heads: int = 2, dtype=torch.float32, seed: int = 0,
    latent: int = LATENT, rope: int = ROPE,
):  # fmt: skip
    """A shuffled page pool, a page table padded with -1 and absorbed queries. Returns q, cache, table, lens."""
    gen = torch.Generator().manual_seed(seed)
    pages_per_request = [-(-n // page_size) for n in seq_lens]
    num_pages = sum(pages_per_request) + 2  # spare pages nobody owns
    cache = torch.randn(num_pages, page_size, latent + rope, generator=gen).to(dtype)
    order = torch.randperm(num_pages, generator=gen)
    table = torch.full((len(seq_lens), max(pages_per_request + [1]) + 1), -1, dtype=torch.int32)
    used = 0
    for n, count in enumerate(pages_per_request):
        table[n, :count] = order[used : used + count]
        used += count
    q = torch.randn(len(seq_lens), num_heads, latent + rope, generator=gen).to(dtype)
    return q, cache, table, torch.tensor(seq_lens, dtype=torch.int32)


def test_absorbed_reference_matches_expanded_sdpa():
    torch.manual_seed(0)
    heads, nope, v_dim, length = 3, 8, 8, 11
    scale = (nope + ROPE) ** -0.5
    w_kc = torch.randn(heads, nope, LATENT, dtype=torch.float64) / LATENT**0.5  # kv_b's key rows per head
    w_vc = torch.randn(heads, v_dim, LATENT, dtype=torch.float64) / LATENT**0.5  # kv_b's value rows per head
    latent = torch.randn(length, LATENT, dtype=torch.float64)
    k_rope = torch.randn(length, ROPE, dtype=torch.float64)
    q_nope = torch.randn(heads, nope, dtype=torch.float64)
    q_rope = torch.randn(heads, ROPE, dtype=torch.float64)

    # plain MLA: expand keys and values per head, attend with SDPA
    k = torch.cat([torch.einsum("lc,hdc->hld", latent, w_kc), k_rope.expand(heads, length, ROPE)], dim=-1)
    v = torch.einsum("lc,hdc->hld", latent, w_vc)
    q = torch.cat([q_nope, q_rope], dim=-1)[:, None, :]
    expanded = F.scaled_dot_product_attention(q[None], k[None], v[None], scale=scale)[0, :, 0]  # [H, v_dim]

    # absorbed: q_nope through W_kc into latent space, attend over the cache, W_vc afterwards
    q_abs = torch.cat([torch.einsum("hd,hdc->hc", q_nope, w_kc), q_rope], dim=-1).float()[None]
    cache = torch.cat([latent, k_rope], dim=-1).float().reshape(1, length, LATENT + ROPE)
    out = mla_decode_reference(
        q_abs, cache, torch.zeros(1, 1, dtype=torch.int32), torch.tensor([length]), LATENT, scale
    )
    absorbed = torch.einsum("hc,hdc->hd", out[0].double(), w_vc)
    assert_close(absorbed.float(), expanded.float(), "fp32", what="absorbed vs expanded")


def test_prefill_reference_matches_causal_sdpa_after_a_past():
    """mla_attention_reference (the model's reference tier): queries at positions past .. past + n - 1 over every
    cached latent, against SDPA on keys and values expanded per head, each query's visible keys given explicitly."""
    gen = torch.Generator().manual_seed(3)
    heads, nope, v_dim, past, n = 3, 8, 6, 5, 4
    scale = (nope + ROPE) ** -0.5 * 1.3  # a YaRN-like factor on top
    kv_b = torch.randn(heads * (nope + v_dim), LATENT, generator=gen, dtype=torch.float64) / LATENT**0.5
    latents = torch.randn(past + n, LATENT + ROPE, generator=gen, dtype=torch.float64)
    q = torch.randn(n, heads, nope + ROPE, generator=gen, dtype=torch.float64)
    got = mla_attention_reference(q.float(), latents.float(), kv_b.float(), LATENT, v_dim, scale, past)

    kv = (latents[:, :LATENT] @ kv_b.T).view(past + n, heads, nope + v_dim)
    k = torch.cat([kv[..., :nope], latents[:, None, LATENT:].expand(-1, heads, -1)], dim=-1).transpose(0, 1)
    v = kv[..., nope:].transpose(0, 1)  # [H, t, v]
    visible = torch.tensor([[j <= past + i for j in range(past + n)] for i in range(n)])
    want = F.scaled_dot_product_attention(q.transpose(0, 1), k, v, attn_mask=visible, scale=scale).transpose(0, 1)
    assert got.shape == (n, heads, v_dim) and got.dtype == torch.float32
    assert_close(got, want.float(), "fp32", what="prefill reference vs causal SDPA")


def test_gather_crosses_pages_in_table_order():
    _, cache, table, _ = paged_cache([7], page_size=3)
    rows = gather_request_tokens(cache, table, 0, 7)
    assert torch.equal(rows[3], cache[table[0, 1], 0]) and torch.equal(rows[6], cache[table[0, 2], 0])


CASES = {
    "one_token": ([1], 4),
    "ragged": ([1, 5, 16, 17, 33], 4),  # page boundaries at 4 and 16, block boundaries at 16 and 32
    "pages_longer_than_block": ([40, 3], 32),
    "empty_request": ([0, 9], 8),
}


@pytest.mark.parametrize("case", CASES)
def test_batched_matches_reference(device, case):
    seq_lens, page_size = CASES[case]
    q, cache, table, lens = paged_cache(seq_lens, page_size, seed=1)
    want = mla_decode_reference(q, cache, table, lens, LATENT, 0.2)
    got = mla_decode(*(t.to(device) for t in (q, cache, table, lens)), LATENT, 0.2, backend="torch")
    assert_close(got, want, "fp32", what=f"batched {case}")


@pytest.mark.parametrize("case", CASES)
def test_triton_fp32(device, case):
    seq_lens, page_size = CASES[case]
    q, cache, table, lens = paged_cache(seq_lens, page_size, num_heads=3, seed=2)
    want = mla_decode_reference(q, cache, table, lens, LATENT, 0.2)
    got = mla_decode(*(t.to(device) for t in (q, cache, table, lens)), LATENT, 0.2, backend="triton")
    assert_close(got, want, "fp32_kernel", what=f"triton {case}")


def test_triton_bf16_many_heads(device):
    q, cache, table, lens = paged_cache(
        [20, 2], page_size=8, num_heads=18, dtype=torch.bfloat16, seed=3
    )  # 2 head blocks
    on_device = (t.to(device) for t in (q, cache, table, lens))
    got = mla_decode(*on_device, LATENT, (8 + ROPE) ** -0.5, backend="triton")
    assert got.dtype == torch.bfloat16
    want = mla_decode_reference(q, cache, table, lens, LATENT, (8 + ROPE) ** -0.5)
    assert_close(got, want, "bf16_kernel", what="triton bf16")


def test_batched_bf16_within_bf16_of_the_reference_and_the_kernel(device):
    """The CPU path on a bf16 cache, where it rounds its probabilities to bf16 before they meet the values (a no-op on
    the fp32 caches of test_batched_matches_reference): within bf16 of the fp32 reference and of the Triton kernel."""
    q, cache, table, lens = paged_cache([20, 2, 0], page_size=8, num_heads=5, dtype=torch.bfloat16, seed=6)
    scale = (8 + ROPE) ** -0.5
    on_device = [t.to(device) for t in (q, cache, table, lens)]
    got = mla_decode(*on_device, LATENT, scale, backend="torch")
    assert got.dtype == torch.bfloat16 and torch.equal(got[2], torch.zeros_like(got[2]))
    want = mla_decode_reference(q, cache, table, lens, LATENT, scale)
    assert_close(got[:2], want[:2], "bf16_kernel", what="batched bf16 vs reference")
    kernel = mla_decode(*on_device, LATENT, scale, backend="triton")
    assert_close(got[:2], kernel[:2], "bf16_kernel", what="batched bf16 vs triton")


def test_triton_widths_below_the_dot_minimum_and_not_powers_of_two(device):
    """A rope part of 8 (tl.dot needs 16) and a latent of 24: the kernel pads its tiles and masks the padding."""
    q, cache, table, lens = paged_cache([9, 1], page_size=4, latent=24, rope=8, seed=5)
    got = mla_decode(*(t.to(device) for t in (q, cache, table, lens)), 24, (8 + 8) ** -0.5, backend="triton")
    want = mla_decode_reference(q, cache, table, lens, 24, (8 + 8) ** -0.5)
    assert_close(got, want, "fp32_kernel", what="padded tiles")


def test_specializations():
    k3 = KernelDims(hidden_size=7168, mla_num_heads=96, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64)
    (spec,) = specializations(k3)
    assert spec.constexprs["KV_LORA"] == 512 and spec.constexprs["ROPE"] == 64
    assert list(spec.signature) == spec.fn.arg_names
    assert {k for k, v in spec.signature.items() if v == "constexpr"} == set(spec.constexprs)
    assert specializations(KernelDims(hidden_size=64)) == []
