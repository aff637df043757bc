"""What the compile stage needs from each kernel package: the concrete specialisations a spec asks for.

Every op package under dayone.kernels exposes `specializations(dims: KernelDims) -> list[Specialization]` in its
`aot` module (dayone.kernels.<op>.aot), beside the public op that its __init__ exports.
The compile stage (dayone.kernels.aot) turns each into a cubin per GPU arch without a GPU present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KernelDims:
    """The dimensions of one model that decide kernel specialisations (filled from a ModelSpec).

    A zero means the model has no such part (e.g. kda_num_heads=0 for a model without KDA layers).
    """

    hidden_size: int
    kda_num_heads: int = 0
    kda_head_dim: int = 0
    kda_gate: str = ""  # the KDA decay gate, "plain" (Kimi Linear) | "safe" (Kimi K3); "" when there is no KDA
    conv_kernel_size: int = 0
    mla_num_heads: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    moe_hidden_size: int = 0  # the width routed experts see: the latent size for a latent MoE, else hidden_size
    moe_intermediate_size: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    latent_moe: bool = False
    mxfp4_group_size: int = 0  # 0 when routed experts are not MXFP4
    attn_res_max_rows: int = 0  # bank snapshots + live prefix at most; 0 for a plain residual stream
    activation: str = "silu"  # "silu" | "situ"
    dtype: str = "bf16"

    def __post_init__(self) -> None:
        if self.kda_gate not in ("", "plain", "safe"):
            raise ValueError(f"kda_gate must be 'plain', 'safe' or '' (no KDA), got {self.kda_gate!r}")


@dataclass(frozen=True)
class Specialization:
    """One kernel instance to compile: the @triton.jit function, its signature and constexpr values.

    signature maps every argument name to a Triton type string ("*bf16", "*fp32", "i32", "fp32", "constexpr");
    constexprs gives the value of each "constexpr" argument.
    """

    kernel: str  # dotted name, e.g. "kda.chunk_fwd"
    fn: Any  # triton.runtime.jit.JITFunction
    signature: dict[str, str]
    constexprs: dict[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 2
    # Register spills (ptxas -v: spill stores + spill loads, bytes per thread) this instance is known to have on its
    # target archs, a measured figure explained where it is set; the AOT spill budget is at least this. 0: none.
    known_spill_bytes: int = 0

    def config(self) -> str:
        """A short, stable description of this instance for tables and cache keys."""
        parts = [f"{k}={v}" for k, v in sorted(self.constexprs.items())]
        parts += [f"warps={self.num_warps}", f"stages={self.num_stages}"]
        return " ".join(parts)
