"""One decoder layer: attention (KDA or MLA) and FFN (dense MLP or MoE), joined by plain or attention residuals.

Plain:     h += attn(input_layernorm(h));  h += ffn(post_attention_layernorm(h)).
Attention: a = attn(input_layernorm(Aggregate_attn(bank, prefix)));
           at a snapshot layer (index % block_size == 0) the old prefix joins the bank and prefix = a, else prefix += a;
           prefix += ffn(post_attention_layernorm(Aggregate_mlp(bank, prefix))).
"""

from __future__ import annotations

from functools import partial

from dayone.adapters.model.attn_residual import ResidualMix, Stream
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.cache import KDAState, MLAState
from dayone.adapters.model.capture import Capture, record
from dayone.adapters.model.config import Tier
from dayone.adapters.model.kda import KDA
from dayone.adapters.model.mla import MLA
from dayone.adapters.model.mlp import MLP
from dayone.adapters.model.module import SpecModule
from dayone.adapters.model.moe import MoE
from dayone.adapters.model.norms import rms_norm
from dayone.core.vocabulary import Point, layer_point
from dayone.spec.schema import Layer, ModelSpec


class DecoderLayer(SpecModule):
    def __init__(self, spec: ModelSpec, layer: Layer, tier: Tier, device=None) -> None:
        super().__init__(tier)
        D = spec.hidden_size
        self.index, self.snapshot, self.eps = layer.index, layer.snapshot, spec.norm_eps
        self.attention_residuals = spec.residual.kind == "attention"
        self.add_weight("input_layernorm", (D,), "input_norm", device)
        self.add_weight("post_attention_layernorm", (D,), "post_attention_norm", device)
        if self.attention_residuals:
            self.attn_res = ResidualMix(D, "attn_res", spec.norm_eps, tier, device)
            self.mlp_res = ResidualMix(D, "mlp_res", spec.norm_eps, tier, device)
        self.self_attn = KDA(spec, tier, device) if layer.attention == "kda" else MLA(spec, tier, device)
        if layer.ffn == "dense":
            self.ffn = MLP(D, spec.dense_intermediate_size, spec.activation, "mlp", tier, device)  # type: ignore[arg-type]
        else:
            self.ffn = MoE(spec, layer.index, tier, device)

    def new_state(self, batch_size: int, device=None) -> KDAState | MLAState:
        return self.self_attn.new_state(batch_size, device)

    def forward(self, stream: Stream, batch: Batch, state=None, capture: Capture | None = None) -> Stream:
        point = partial(layer_point, self.index)  # point(Point.OUT): "layers.{i}.out"
        if self.attention_residuals:
            h = self.attn_res.then_norm(stream, self.input_layernorm, point(Point.ATTN_RES), capture)
        else:
            h = rms_norm(stream.prefix, self.input_layernorm, self.eps)
        record(capture, point(Point.ATTN_IN), h)
        a = self.self_attn(h, batch, state, capture)
        record(capture, point(Point.ATTN_OUT), a)
        if not self.attention_residuals:
            stream = Stream(stream.prefix + a)
            h = rms_norm(stream.prefix, self.post_attention_layernorm, self.eps)
        else:
            if self.snapshot:
                stream = Stream(a, [*stream.bank, stream.prefix])
            else:
                stream = Stream(stream.prefix + a, stream.bank)
            h = self.mlp_res.then_norm(stream, self.post_attention_layernorm, point(Point.MLP_RES), capture)
        record(capture, point(Point.MLP_IN), h)
        m = self.ffn(h, capture) if isinstance(self.ffn, MoE) else self.ffn(h)
        record(capture, point(Point.MLP_OUT), m)
        stream = Stream(stream.prefix + m, stream.bank)
        record(capture, point(Point.OUT), stream.prefix)
        return stream
