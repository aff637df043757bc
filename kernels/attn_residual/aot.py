"""What the compile stage needs from attn_residual: one instance for a model with attention residuals
(dayone.compile_stage imports this module; the public op does not)."""

from __future__ import annotations

from dayone.kernels.specialization import KernelDims, Specialization


def specializations(dims: KernelDims) -> list[Specialization]:
    """One instance for a model with attention residuals (the row count is a runtime loop bound); none otherwise."""
    if dims.attn_res_max_rows == 0:
        return []
    from dayone.kernels.attn_residual.kernel import attn_res_kernel

    act = "*" + dims.dtype
    return [
        Specialization(
            kernel="attn_residual.aggregate",
            fn=attn_res_kernel,
            signature={"bank_ptr": act, "prefix_ptr": act, "w_comb_ptr": "*fp32", "norm_ptr": act, "out_ptr": act}
            | {"mixed_ptr": "*fp32", "n_rows": "i32", "D": "i32", "stride_bt": "i32", "stride_bn": "i32"}
            | {
                "stride_pt": "i32",
                "eps": "fp32",
                "score_eps": "fp32",
                "STORE_MIXED": "constexpr",
                "BLOCK_D": "constexpr",
            },
            constexprs={"STORE_MIXED": False, "BLOCK_D": 1 << (dims.hidden_size - 1).bit_length()},
            num_warps=8,
            num_stages=1,
        )
    ]
