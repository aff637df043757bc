"""Planted mistakes in a generated table (a dropped tensor, gate and up swapped, a wrong shard dimension, a stale
derived tensor) are each caught, with a message naming the tensor."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from dayone.adapters.weightmap import walk
from dayone.adapters.weightmap.check import check_table, stale_derived
from engine_emulator import EngineModel
from generate_fixtures import load

P = "language_model.model."
O_PROJ = f"{P}layers.{{i}}.self_attn.o_proj.weight"  # the table's name pattern


def _table(generated, target: str) -> SimpleNamespace:
    """A mutable copy of a generated weight_table module."""
    package = f"dayone_kimi_k3_{target.replace('-', '_')}"
    t = load(generated[target], f"{package}.weight_table")
    return SimpleNamespace(
        LAYERS=t.LAYERS, NUM_EXPERTS=t.NUM_EXPERTS, PARAMS=t.PARAMS, RULES=t.RULES, DERIVED=t.DERIVED
    )


def _edit_rules(table, pick, changes):
    hits = [r for r in table.RULES if pick(r)]
    assert hits, "the planted mistake matched no rule"
    table.RULES = tuple(r._replace(**changes(r)) if pick(r) else r for r in table.RULES)


def test_generated_tables_are_clean(k3, generated):
    spec = k3[0]
    for target in ("sglang", "vllm", "miles", "megatron-bridge"):
        assert check_table(_table(generated, target), spec) == []


def drop_kv_b(table):
    table.RULES = tuple(r for r in table.RULES if not r.source.endswith("self_attn.kv_b_proj.weight"))


def swap_gate_and_up(table):
    _edit_rules(table, lambda r: r.source.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")),
                lambda r: {"part": 1 - r.part})  # fmt: skip


def split_kda_o_proj_on_columns(table):
    table.PARAMS = tuple(p._replace(tp="column") if p.name == O_PROJ and p.layers == "kda" else p for p in table.PARAMS)


def forget_w_kc(table):
    table.DERIVED = tuple(d for d in table.DERIVED if d.kind != "mla_w_kc")


# mistake -> (target whose table gets it, the edit, the message check_table must give)
PLANTED = {
    "dropped-tensor": ("sglang", drop_kv_b, f"{P}layers.3.self_attn.kv_b_proj.weight: no rule consumes it"),
    "gate-and-up-swapped": (
        "miles", swap_gate_and_up,
        (f"{P}layers.0.mlp.up_proj.weight: fills part 0 of decoder.layers.{{i}}.mlp.linear_fc1.weight, which the "
         "consumer reads as gate"),
    ),
    "wrong-shard-dimension": (
        "sglang", split_kda_o_proj_on_columns,
        (f"{P}layers.0.self_attn.o_proj.weight: {O_PROJ} splits it on dim 0 (column), its kda.o_proj dims call "
         "for dim 1 (row)"),
    ),
    "stale-derived-tensor-missing-from-the-table": (
        "sglang", forget_w_kc,
        f"{P}layers.3.self_attn.kv_b_proj.weight: its derived mla_w_kc tensor is not recomputed after loads",
    ),
}  # fmt: skip


@pytest.mark.parametrize("mistake", PLANTED)
def test_planted_mistake_is_named(k3, generated, mistake):
    target, plant, message = PLANTED[mistake]
    table = _table(generated, target)
    plant(table)
    assert message in check_table(table, k3[0])


def test_expert_gate_and_up_shard_ids_swapped(k3, generated):
    table = _table(generated, "sglang")
    swap = {"w1": "w3", "w3": "w1"}
    _edit_rules(table, lambda r: r.shard in swap, lambda r: {"shard": swap[r.shard]})
    problems = check_table(table, k3[0])
    assert any(p.startswith(f"{P}layers.1.block_sparse_moe.experts.0.w1.weight_packed: loaded as shard 'w3'")
               for p in problems), problems  # fmt: skip


def test_stale_derived_tensor_after_an_update_without_refresh(k3, generated, monkeypatch):
    tensors = k3[1]
    loading = load(generated["sglang"], "dayone_kimi_k3_sglang.loading")
    table = load(generated["sglang"], "dayone_kimi_k3_sglang.weight_table")
    model = EngineModel(table, walk.Parallel())
    loading.TableLoader(table, model).load(tensors.items())
    monkeypatch.setattr(loading.TableLoader, "refresh_derived", lambda self, layers=None: {})
    kv_b = f"{P}layers.4.self_attn.kv_b_proj.weight"
    loading.TableLoader(table, model).load([(kv_b, tensors[kv_b] * 3)])
    problems = stale_derived(table, model)
    assert problems == [
        f"{P}layers.4.self_attn.w_kc: stale, differs from what {kv_b} now give",
        f"{P}layers.4.self_attn.w_vc: stale, differs from what {kv_b} now give",
    ]


@pytest.mark.parametrize("layout", ["inference", "megatron"])
def test_unknown_tensor_in_a_stream_is_named(k3, generated, layout):
    loading = load(generated["sglang"], "dayone_kimi_k3_sglang.loading")
    table = load(generated["sglang"], "dayone_kimi_k3_sglang.weight_table")
    model = EngineModel(table, walk.Parallel())
    with pytest.raises(KeyError, match="language_model.model.layers.0.self_attn.bogus.weight"):
        loading.TableLoader(table, model).load([(f"{P}layers.0.self_attn.bogus.weight", k3[1][f"{P}norm.weight"])])
