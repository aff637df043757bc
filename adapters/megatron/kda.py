"""Kimi Delta Attention as a Megatron self-attention module (megatron-core 0.16.1 has GatedDeltaNet, not KDA).

Per token, H heads of K = V = head_dim (the maths of `dayone.adapters.model.kda`, run by dayone's kernels):
    q, k, v = SiLU(causal depthwise conv(in_proj(x)))      in_proj = [q; k; v; g] (g: full-rank output gate)
    g_raw   = f_b_proj(f_a_proj(x));  beta = b from beta_proj(x)
    o       = chunk_kda(q, k, v, g_raw, beta, A_log, dt_bias)   (L2-normalised q, k; the spec's gate); with autograd
              on, `chunk_kda_triton_autograd` on CUDA (the Triton forward and backward kernels) and
              `chunk_kda_autograd` on a CPU (the same chunked algorithm in torch ops autograd differentiates)
    out     = out_proj(RMSNorm_head(o; out_norm) * sigmoid(output gate(x)))
Tensor parallel as GatedDeltaNet: the column-parallel projections give each rank H / TP whole heads (the weight map
splits every fused part, so a rank's in_proj rows are [q_r; k_r; v_r; g_r]); out_proj is row-parallel. The
low-rank factors f_a_proj and g_a_proj are held whole by every rank. Hidden states are [s, b, D]. Sequence parallel:
the conv and the recurrence run along the whole sequence, so the layer gathers it once on the way in and scatters the
output back (its linears run without sequence-parallel communication of their own, as Miles' K3 layer does).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from dayone.kernels.gated_rmsnorm import gated_rmsnorm
from dayone.kernels.kda import chunk_kda
from dayone.kernels.kda.autograd import chunk_kda_triton_autograd
from dayone.kernels.kda.torch_chunk_autograd import chunk_kda_autograd
from dayone.kernels.short_conv import short_conv
from dayone.spec.schema import KDASpec
from megatron.core.tensor_parallel.layers import set_tensor_model_parallel_attributes
from megatron.core.tensor_parallel.mappings import (
    gather_from_sequence_parallel_region,
    scatter_to_sequence_parallel_region,
)
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec, build_module
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.utils import get_pg_size


@dataclass
class KDASubmodules:
    in_proj: ModuleSpec | type = None
    f_a_proj: ModuleSpec | type = None
    f_b_proj: ModuleSpec | type = None
    beta_proj: ModuleSpec | type = None
    g_a_proj: ModuleSpec | type = None  # low-rank output gate only
    g_b_proj: ModuleSpec | type = None
    out_norm: ModuleSpec | type = None
    out_proj: ModuleSpec | type = None


class KimiDeltaAttention(MegatronModule):
    def __init__(
        self,
        config: TransformerConfig,
        submodules: KDASubmodules,
        layer_number: int,
        kda: KDASpec,
        pg_collection=None,
        **_,
    ) -> None:
        super().__init__(config=config)
        self.layer_number = layer_number
        tp_group = pg_collection.tp if pg_collection is not None else None
        tp = get_pg_size(tp_group)
        if kda.num_heads % tp:
            raise ValueError(f"KDA: {kda.num_heads} heads do not split over tensor parallel size {tp}")
        self.heads, self.head_dim, self.width = kda.num_heads // tp, kda.head_dim, kda.conv_kernel_size
        self.gate_kind, self.lower = kda.gate.kind, kda.gate.lower_bound
        self.full_rank_gate = kda.output_gate.kind == "full_rank"
        D, HK = config.hidden_size, kda.num_heads * kda.head_dim
        parts = 4 if self.full_rank_gate else 3
        self.tp_group, self.sequence_parallel = tp_group, config.sequence_parallel
        linear_config = copy.copy(config)
        linear_config.sequence_parallel = False
        column = {"config": linear_config, "init_method": config.init_method, "bias": False, "gather_output": False,
                  "tp_group": tp_group}  # fmt: skip
        self.in_proj = build_module(submodules.in_proj, D, parts * HK, **column)
        whole = {"config": linear_config, "init_method": config.init_method, "bias": False}
        self.f_a_proj = build_module(submodules.f_a_proj, D, kda.gate.rank, **whole)
        self.f_b_proj = build_module(submodules.f_b_proj, kda.gate.rank, HK, **column)
        self.beta_proj = build_module(submodules.beta_proj, D, kda.num_heads, **column)
        if not self.full_rank_gate:
            self.g_a_proj = build_module(submodules.g_a_proj, D, kda.output_gate.rank, **whole)
            self.g_b_proj = build_module(submodules.g_b_proj, kda.output_gate.rank, HK, **column)
        local = self.heads * self.head_dim
        # Depthwise conv over [q | k | v] channels (nn.Conv1d, as GatedDeltaNet holds it); split over TP by head.
        self.conv1d = torch.nn.Conv1d(3 * local, 3 * local, self.width, groups=3 * local, bias=False,
                                      dtype=config.params_dtype)  # fmt: skip
        set_tensor_model_parallel_attributes(self.conv1d.weight, is_parallel=tp > 1, dim=0, stride=1)
        self.A_log = self._parameter((self.heads,), config, tp_group, fill=lambda t: t.uniform_(0, 1))
        self.dt_bias = self._parameter((local,), config, tp_group, fill=lambda t: t.zero_())
        self.out_norm = build_module(submodules.out_norm, config=config, hidden_size=self.head_dim, eps=kda.norm_eps)
        self.out_proj = build_module(
            submodules.out_proj, HK, D, config=linear_config, init_method=config.output_layer_init_method, bias=False,
            input_is_parallel=True, skip_bias_add=True, tp_group=tp_group,
        )  # fmt: skip

    @staticmethod
    def _parameter(shape, config: TransformerConfig, tp_group, fill=None) -> torch.nn.Parameter:
        param = torch.nn.Parameter(torch.empty(shape, dtype=config.params_dtype))
        if config.perform_initialization:
            (fill or config.init_method)(param.data)
        set_tensor_model_parallel_attributes(param, is_parallel=get_pg_size(tp_group) > 1, dim=0, stride=1)
        return param

    def forward(self, hidden_states: torch.Tensor, attention_mask=None, packed_seq_params=None, **_):
        """hidden_states [s, b, D] (normalized; [s / TP, b, D] under sequence parallelism) -> (output, None)."""
        if self.sequence_parallel:
            hidden_states = gather_from_sequence_parallel_region(
                hidden_states, tensor_parallel_output_grad=False, group=self.tp_group
            )
        s, b, _ = hidden_states.shape
        H, K = self.heads, self.head_dim
        # packed sequences (THD: [t, 1, D]): the conv and the recurrence restart at every cu_seqlens boundary
        cu = packed_seq_params.cu_seqlens_q.to(torch.int32) if packed_seq_params is not None else None
        x = hidden_states.transpose(0, 1)  # [b, s, D]: the kernels take batch-first sequences
        projected, _ = self.in_proj(x)
        qkv, gate = (projected, None) if not self.full_rank_gate else projected.split([3 * H * K, H * K], dim=-1)
        mixed, _ = short_conv(qkv, self.conv1d.weight, cu_seqlens=cu, output_final_state=False)
        q, k, v = (t.reshape(b, s, H, K) for t in mixed.split(H * K, dim=-1))
        g = self.f_b_proj(self.f_a_proj(x)[0])[0].reshape(b, s, H, K)
        beta, _ = self.beta_proj(x)
        gate_args = {"gate": self.gate_kind, "lower_bound": self.lower if self.lower is not None else -5.0}
        if torch.is_grad_enabled():
            # training: Triton forward and backward on a GPU; on a CPU the chunked torch path written for autograd
            train = chunk_kda_triton_autograd if q.is_cuda else chunk_kda_autograd
            o, _ = train(
                q, k, v, g, beta, self.A_log, self.dt_bias, gate_args["gate"], gate_args["lower_bound"], None, None,
                False, cu, True, True,
            )  # fmt: skip
        else:
            o, _ = chunk_kda(
                q, k, v, g, beta, self.A_log, self.dt_bias, **gate_args, cu_seqlens=cu, output_final_state=False
            )
        if gate is None:
            gate = self.g_b_proj(self.g_a_proj(x)[0])[0]
        o = gated_rmsnorm(o.to(x.dtype), gate.reshape(b, s, H, K), self.out_norm.weight, self.out_norm.eps)
        out, bias = self.out_proj(o.reshape(b, s, H * K).transpose(0, 1).contiguous())
        if self.sequence_parallel:
            out = scatter_to_sequence_parallel_region(out, group=self.tp_group)
        return out, bias
