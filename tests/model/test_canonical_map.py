"""The model loads through the weight map's canonical layout: the table passes the checks every engine table passes,
it fills exactly the weights the model declares (by their roles), dtypes come from it, and a planted mistake in it
stops the model from being built or loaded, naming the tensor."""

from __future__ import annotations

import pytest
import torch
from dayone.adapters.model import SpecModel, WeightLoader
from dayone.adapters.model.module import SpecModule
from dayone.adapters.model.weights import canonical_map
from dayone.adapters.weightmap import layouts, quirks, walk
from dayone.adapters.weightmap.check import check_table
from dayone.core.errors import InputError
from dayone.spec.manifest import build_manifest


def _specs(k3_5, kimi_linear):
    return [k3_5[0], kimi_linear[1]]


def test_canonical_table_passes_the_table_checks(k3_5, kimi_linear):
    for spec in _specs(k3_5, kimi_linear):
        assert check_table(canonical_map(spec), spec) == []


def test_table_fills_each_declared_weight_from_its_role(k3_5, kimi_linear):
    """Each buffer a module declares with role R is the target of the checkpoint tensor of role R, and the table
    fills nothing else: the model's roles and the table agree one to one."""
    for spec in _specs(k3_5, kimi_linear):
        model = SpecModel(spec, "reference", device="meta")
        declared = {}
        for owner, module in model.named_modules():
            if isinstance(module, SpecModule):
                for role, attr in module.roles.items():
                    declared[f"{owner}.{attr}" if owner else attr] = role
        table = canonical_map(spec)
        filled = {}
        roles = {t.name: t.role for t in build_manifest(spec).tensors}
        for row in walk.rows(table):
            if row.rule.transform != "passthrough":
                filled.setdefault(walk.fill(row.target, row.layer), set()).add(roles[row.source])
        assert filled == {name: {role} for name, role in declared.items()}


def test_dtypes_come_from_the_table(k3_5, kimi_linear):
    """fp32 where the checkpoint singles a weight out as fp32 (spec checkpoint.float32) and where an op takes fp32
    (KDA's conv weights, o_norm, A_log and dt_bias; the router's correction bias), MXFP4 bytes uint8, else the tier's."""
    spec = k3_5[0]
    fast = SpecModel(spec, "fast", device="meta")
    kda, experts = fast.layers[0].self_attn, fast.layers[2].ffn.experts
    assert kda.A_log.dtype == kda.dt_bias.dtype == kda.q_conv.dtype == kda.o_norm.dtype == torch.float32
    assert kda.q_proj.dtype == torch.bfloat16 and experts.gate_packed.dtype == experts.gate_scale.dtype == torch.uint8
    linear = kimi_linear[1]  # written in fp32: no weight stands out, all take the tier's dtype but what an op takes
    model = SpecModel(linear, "fast", device="meta")
    fp32 = {n for n, b in model.named_buffers() if b.dtype == torch.float32}
    kda_fp32 = ("A_log", "dt_bias", "q_conv", "k_conv", "v_conv", "o_norm")
    biases = {f"layers.{i}.ffn.router.e_score_correction_bias" for i, layer in enumerate(linear.layers)
              if layer.ffn == "moe" and linear.moe.router.correction_bias}  # fmt: skip
    assert biases and fp32 == biases | {f"layers.{i}.self_attn.{w}" for i, layer in enumerate(linear.layers)
                                        if layer.attention == "kda" for w in kda_fp32}  # fmt: skip


def test_planted_rename_stops_the_build_naming_the_tensor(k3_5, monkeypatch):
    monkeypatch.setitem(layouts.CANONICAL_LAYER, "mla.kv_b", "self_attn.kv_b")
    with pytest.raises(InputError, match=r"^layers\.3\.self_attn\.kv_b: a parameter of the canonical weight map"):
        SpecModel(k3_5[0], "reference", device="meta")


def test_planted_quirk_stops_the_build_naming_the_tensor(k3_5, monkeypatch):
    """A_log without its quirk: the table would fill the padded [1, 1, heads + padding] tensor as it is stored."""
    monkeypatch.delitem(quirks.TRANSFORMS, "kda.a_log")
    with pytest.raises(InputError, match=r"^layers\.0\.self_attn\.A_log: shape \[4\] in the canonical weight"):
        SpecModel(k3_5[0], "reference", device="meta")


def test_planted_swap_loads_each_tensor_into_the_other(k3_5, monkeypatch):
    """Two same-shaped tensors swapped in the table: nothing but the numbers can tell (see tests/validate/
    test_planted_mapping.py for validate failing on it)."""
    spec, tensors = k3_5
    monkeypatch.setitem(layouts.CANONICAL_LAYER, "kda.q_proj", "self_attn.k_proj")
    monkeypatch.setitem(layouts.CANONICAL_LAYER, "kda.k_proj", "self_attn.q_proj")
    model = SpecModel(spec, "reference")
    WeightLoader(spec, tensors.__getitem__).load(model)
    name = next(n for n in tensors if n.endswith("layers.0.self_attn.q_proj.weight"))
    assert torch.equal(model.layers[0].self_attn.k_proj, tensors[name].float())


def test_planted_skip_of_a_model_weight_stops_the_build_naming_it(k3_5, monkeypatch):
    """The other direction: a table that leaves one of the model's weights unfilled (dt_bias marked a passthrough
    tensor, never loaded) is refused when the model is built, not left as uninitialised memory."""
    monkeypatch.setitem(quirks.TRANSFORMS, "kda.dt_bias", "passthrough")
    with pytest.raises(InputError, match=r"^layers\.0\.self_attn\.dt_bias: a weight of the model that the canonical"):
        SpecModel(k3_5[0], "reference", device="meta")
