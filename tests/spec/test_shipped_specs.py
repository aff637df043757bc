"""The shipped specs against the published figures (reference/kimi-k3.md, kimi-linear.md)."""

import json
from pathlib import Path

import pytest
from dayone.spec.manifest import build_manifest
from dayone.spec.params import count_params
from dayone.spec.registry import json_schema, list_specs, load_spec


def test_both_models_are_shipped():
    assert {"kimi-k3", "kimi-linear-48b-a3b"} <= set(list_specs())


def test_k3_layer_table():
    spec = load_spec("kimi-k3")
    kinds = spec.attention_kinds
    assert (kinds.count("kda"), kinds.count("mla"), spec.num_layers) == (69, 24, 93)
    mla_one_based = [i + 1 for i, k in enumerate(kinds) if k == "mla"]
    assert mla_one_based == [*range(4, 93, 4), 93]
    assert spec.ffn_kinds[0] == "dense" and set(spec.ffn_kinds[1:]) == {"moe"}
    assert [layer.index for layer in spec.layers if layer.snapshot] == [0, 12, 24, 36, 48, 60, 72, 84]


def test_kimi_linear_layer_table():
    spec = load_spec("kimi-linear-48b-a3b")
    assert (spec.attention_kinds.count("kda"), spec.attention_kinds.count("mla")) == (20, 7)
    assert [i + 1 for i, k in enumerate(spec.attention_kinds) if k == "mla"] == [4, 8, 12, 16, 20, 24, 27]
    assert not any(layer.snapshot for layer in spec.layers)


def test_k3_manifest_reproduces_the_published_inventory():
    manifest = build_manifest(load_spec("kimi-k3"))
    assert len(manifest) == 497_220
    assert manifest.nbytes == 1_560_860_324_864
    names = manifest.by_name()
    t = names["language_model.model.layers.5.block_sparse_moe.experts.17.w2.weight_packed"]
    assert (t.shape, t.dtype) == ((3584, 1536), "U8")
    t = names["language_model.model.layers.5.block_sparse_moe.experts.17.w1.weight_scale"]
    assert (t.shape, t.dtype) == ((3072, 112), "U8")
    assert names["language_model.model.layers.0.self_attn.A_log"].shape == (128,)
    assert names["language_model.model.layers.0.self_attn.q_conv1d.weight"].dtype == "F32"
    assert names["language_model.model.layers.3.self_attn.kv_b_proj.weight"].shape == (24576, 512)
    assert names["language_model.lm_head.weight"].shape == (163840, 7168)
    assert sum(1 for t in manifest.tensors if t.role == "passthrough.vision") == 168


def test_kimi_linear_manifest_count():
    manifest = build_manifest(load_spec("kimi-linear-48b-a3b"))
    assert len(manifest) == 20_493
    names = manifest.by_name()
    assert names["model.layers.0.self_attn.A_log"].shape == (1, 1, 32, 1)
    assert names["model.layers.3.self_attn.q_proj.weight"].shape == (6144, 2304)


def test_parameter_counts():
    k3 = load_spec("kimi-k3")
    counts = count_params(k3, build_manifest(k3))
    assert counts.total == pytest.approx(2.78e12, rel=0.01)
    kl = load_spec("kimi-linear-48b-a3b")
    kl_counts = count_params(kl, build_manifest(kl))
    assert kl_counts.total == pytest.approx(49.1e9, rel=0.01)
    assert kl_counts.activated == pytest.approx(3e9, rel=0.2)  # "A3B"


def test_exported_json_schema_is_current():
    on_disk = json.loads((Path(__file__).resolve().parents[2] / "spec" / "schema.json").read_text())
    assert on_disk == json_schema(), "regenerate with: integrate spec schema -o spec/schema.json"


@pytest.mark.parametrize("name", ["kimi-k3", "kimi-linear-48b-a3b"])
def test_entry_table_answers_like_the_expanded_manifest(name):
    from dayone.spec.manifest import EntryTable

    manifest = build_manifest(load_spec(name))
    full = {t.name: (list(t.shape), t.dtype, t.nbytes) for t in manifest.tensors}
    prefix = next(t.name for t in manifest.tensors if t.expert == 3).rsplit(".experts.", 1)[0]
    wrong = [f"{prefix}.experts.03.w1.weight", f"{prefix}.experts.999999.w1.weight", f"{prefix}.experts.x.w1",
             f"{prefix}.experts.3.w9.weight", "model.unknown.weight"]  # fmt: skip
    shard = [n for n in full if ".layers.3." not in n][-12000:]  # the last layers' experts, and no layer 3
    names = [*wrong[:2], *reversed(shard), *wrong[2:]]
    table = EntryTable(manifest)
    assert len(table) == len(full)
    assert table.lookup(names) == [None, None, *(full[n] for n in reversed(shard)), None, None, None]
    fresh = EntryTable(manifest)
    assert [fresh.get(n) for n in wrong + list(full)] == [None] * len(wrong) + list(full.values())
    assert set(EntryTable(manifest).keys()) == set(full)
