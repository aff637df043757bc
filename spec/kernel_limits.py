"""What dayone's Triton kernels cannot do, checked when a spec is loaded: one line naming the field, instead of a
compile that fails (or a kernel that traps) minutes later.

The kernels pad every width to a power of two and mask the padding, so head dims and latent widths need not be
powers of two (96 and 192 are in use). What is left is the GPU's budget: a kernel that keeps a whole head or a whole
latent row in one tile needs shared memory that grows with it, and a block may use at most 227 KiB on sm_90 and
sm_100. The limits were measured with `integrate compile` (docs/kernels.md has the resource tables). Kept apart from
the kernels so that loading a spec imports neither triton nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dayone.core.errors import InputError

if TYPE_CHECKING:
    from dayone.spec.schema import ModelSpec

SHARED_MEMORY_LIMIT = 227 * 1024  # bytes per block, opt-in maximum, sm_90 and sm_100 alike (kernels/aot.py)
# KDA's chunk kernels hold [64, tile] fp32 tiles of a whole head: a 256 tile takes 208 KiB of shared memory in the
# output kernel; a 512 tile (head dim 257..512) takes 272 KiB in the prepare kernel on sm_90, over the limit.
MAX_KDA_TILE = 256
# mla_decode's shared memory (16 heads, 32 tokens a step, bf16, two stages): 96 B per latent tile column, 32 B per
# rope tile column and 16 KiB besides, measured on sm_90 at latent 512..2048 and rope 64..512 (exact at every point).
MLA_BYTES_PER_LATENT, MLA_BYTES_PER_ROPE, MLA_BYTES_FIXED = 96, 32, 16 * 1024
MXFP4_GROUP_SIZE = 32  # the MXFP4 kernels decode one E8M0 scale per 32 values (dayone.kernels.mxfp4.reference)


def tile_width(width: int) -> int:
    """The tile the KDA kernels use for a head dim: the next power of two (tl.arange needs one), at least 16 (tl.dot's
    smallest). Defined here, below the kernels, so that the limits and the kernels share it."""
    return max(16, 1 << (width - 1).bit_length())


def kernel_limit_errors(spec: ModelSpec) -> list[str]:
    """Every field of the spec that no kernel build can serve, as 'field: why'; empty when all fit."""
    errors = []
    kda, mla, quant = spec.kda, spec.mla, spec.quantization
    if kda and tile_width(kda.head_dim) > MAX_KDA_TILE:
        errors.append(
            f"kda.head_dim: {kda.head_dim} needs {tile_width(kda.head_dim)}-wide tiles; the KDA chunk kernels fit a "
            f"block's {SHARED_MEMORY_LIMIT // 1024} KiB of shared memory (sm_90, sm_100) up to head dim {MAX_KDA_TILE}"
        )
    if mla:
        need = (
            MLA_BYTES_PER_LATENT * tile_width(mla.kv_lora_rank)
            + MLA_BYTES_PER_ROPE * tile_width(mla.qk_rope_head_dim)
            + MLA_BYTES_FIXED
        )
        if need > SHARED_MEMORY_LIMIT:
            errors.append(
                f"mla.kv_lora_rank: {mla.kv_lora_rank} (with qk_rope_head_dim {mla.qk_rope_head_dim}) needs "
                f"{need // 1024} KiB of shared memory in mla_decode; a block has {SHARED_MEMORY_LIMIT // 1024} KiB "
                "(sm_90, sm_100)"
            )
    if quant and quant.group_size != MXFP4_GROUP_SIZE:
        errors.append(
            f"quantization.group_size: {quant.group_size}; the MXFP4 kernels read one scale per {MXFP4_GROUP_SIZE} "
            "values (the OCP MX block size)"
        )
    return errors


def check_kernel_limits(spec: ModelSpec, where: str) -> None:
    """Raise InputError '<where>: <field>: <why>' for the first field the kernels cannot serve."""
    errors = kernel_limit_errors(spec)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InputError(f"{where}: {errors[0]}{more}")
