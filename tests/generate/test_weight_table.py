"""The weight map on the CPU: shipped specs' tables are sound, every tensor of a synthetic K3 checkpoint is consumed
once and every parameter produced with its shape, and HF -> Megatron -> HF (and HF -> vLLM -> HF, with its replicated
and aligned KDA in_proj) is bitwise identical at TP 1-8, EP 1-2."""

from __future__ import annotations

import pytest
import torch
from dayone.adapters.weightmap import build_weight_map, walk
from dayone.adapters.weightmap.check import check_table
from dayone.spec.manifest import build_manifest
from dayone.spec.registry import load_spec
from generate_fixtures import load

LAYOUTS = [("inference", "packed"), ("inference", "dequantize"), ("vllm", "packed"), ("vllm", "dequantize"),
           ("megatron", "packed"), ("megatron", "dequantize")]  # fmt: skip


@pytest.mark.parametrize("name", ["kimi-k3", "kimi-linear-48b-a3b"])
def test_shipped_specs_tables_pass_every_check(name):
    spec = load_spec(name)
    layouts = (
        LAYOUTS if name != "kimi-k3" else [("inference", "packed"), ("vllm", "packed"), ("megatron", "dequantize")]
    )
    for layout, mxfp4 in layouts:
        assert check_table(build_weight_map(spec, layout, mxfp4), spec) == [], (layout, mxfp4)


def test_k3_table_covers_the_497220_release_tensors():
    spec = load_spec("kimi-k3")
    table = build_weight_map(spec, "inference", "packed")
    assert sum(1 for _ in walk.rows(table)) == len(build_manifest(spec)) == 497_220


@pytest.mark.parametrize("layout,mxfp4", LAYOUTS)
def test_every_tensor_consumed_once_and_every_parameter_produced(k3, layout, mxfp4):
    spec, tensors = k3
    table = build_weight_map(spec, layout, mxfp4)
    read: list[str] = []

    def get(name: str) -> torch.Tensor:
        read.append(name)
        return tensors[name]

    counts: dict[str, torch.Tensor] = {}

    def on_write(name, index, row):
        counts.setdefault(name, torch.zeros(walk.local_shape(table, row.param, walk.Parallel()), dtype=torch.int32))
        counts[name][index] += 1

    params = walk.to_target(table, get, on_write=on_write)
    assert sorted(read) == sorted(tensors), "each checkpoint tensor read exactly once"
    expected = {
        walk.fill(p.name, layer, e): p.shape
        for p in table.PARAMS
        for layer in walk.layer_indices(table, p.layers)
        for e in (range(table.NUM_EXPERTS) if p.experts == "named" else (None,))
    }
    assert {n: tuple(t.shape) for n, t in params.items()} == expected
    for name, count in counts.items():
        assert bool((count == 1).all()), f"{name}: elements written {int(count.min())}..{int(count.max())} times"


@pytest.mark.parametrize("mxfp4", ["packed", "dequantize"])
@pytest.mark.parametrize("tp,ep", [(tp, ep) for tp in (1, 2, 4, 8) for ep in (1, 2)])
def test_generated_miles_round_trip_is_bitwise(k3, generated, tp, ep, mxfp4, tmp_path):
    """HF -> Megatron shards of every (tp, ep) rank -> HF through the generated converter (dequantize: the Miles
    table; packed: the same walker on a packed table), bitwise, MXFP4 bytes included."""
    spec, tensors = k3
    convert = load(generated["miles"], "dayone_kimi_k3_miles.convert")
    if mxfp4 == "dequantize":
        shards = {(t, e): convert.load_hf(tensors.__getitem__, t, tp, e, ep) for t in range(tp) for e in range(ep)}
        back = convert.save_hf(shards, tp, ep)
    else:
        table = build_weight_map(spec, "megatron", "packed")
        size = convert.walk.Parallel(0, tp, 0, ep)
        shards = {
            (t, e): convert.walk.to_target(table, tensors.__getitem__, convert.walk.Parallel(t, tp, e, ep))
            for t in range(tp)
            for e in range(ep)
        }
        back = convert.walk.to_hf(table, shards, size)
    assert sorted(back) == sorted(tensors)
    for name, value in tensors.items():
        assert back[name].dtype == value.dtype and torch.equal(back[name], value), name


@pytest.mark.parametrize("tp,ep", [(1, 1), (2, 2), (8, 2)])
def test_vllm_round_trip_is_bitwise(k3, tp, ep):
    """HF -> every vLLM rank's parameters -> HF: f_a whole on every rank, the aligned in_proj's padding dropped."""
    spec, tensors = k3
    table = build_weight_map(spec, "vllm", "packed")
    shards = {
        (t, e): walk.to_target(table, tensors.__getitem__, walk.Parallel(t, tp, e, ep))
        for t in range(tp)
        for e in range(ep)
    }
    in_proj = next(p for p in table.PARAMS if p.name.endswith("in_proj_qkvgfab.weight"))
    f_a = next(n for n in tensors if n.endswith("layers.0.self_attn.f_a_proj.weight"))
    start, rows = walk.part_span(in_proj, 4, tp)
    local = shards[(tp - 1, 0)][walk.fill(in_proj.name, 0)]
    assert torch.equal(local[start : start + rows], tensors[f_a])
    assert local.shape[0] % 16 == 0 and not bool(local[start + rows + in_proj.parts[5] // tp :].any())
    back = walk.to_hf(table, shards, walk.Parallel(0, tp, 0, ep))
    assert sorted(back) == sorted(tensors)
    for name, value in tensors.items():
        assert back[name].dtype == value.dtype and torch.equal(back[name], value), name


def test_miles_weight_sync_hook_gives_checkpoint_tensors(k3, generated):
    """convert_<name>_to_hf on every gathered parameter (Miles' weight sync) yields exactly the checkpoint."""
    tensors = k3[1]
    convert = load(generated["miles"], "dayone_kimi_k3_miles.convert")
    params = convert.load_hf(tensors.__getitem__)
    out = {}
    for name, value in params.items():
        for hf_name, tensor in convert.convert_kimi_k3_to_hf(None, "module.module." + name, value):
            assert hf_name not in out, f"{hf_name} produced twice"
            out[hf_name] = tensor
    assert sorted(out) == sorted(tensors)
    assert all(torch.equal(out[n], tensors[n]) for n in tensors)


def test_a_log_padding_must_be_zero(k3):
    spec, tensors = k3
    bad = dict(tensors)
    name = next(n for n in bad if n.endswith("layers.1.self_attn.A_log"))
    bad[name] = bad[name].clone()
    bad[name][-1] = 1.0
    with pytest.raises(ValueError, match=rf"^{name}: padding entries 8\.\.11 must be zero, index 11 is not$"):
        walk.to_target(build_weight_map(spec, "megatron"), bad.__getitem__)


def test_expert_parallel_ranks_hold_whole_experts(k3):
    """vLLM's --enable-expert-parallel (SGLang's --ep-size): every other parameter is split by tensor parallelism
    as before, and each rank holds its run of routed experts whole, never a slice of every expert."""
    spec, tensors = k3
    table = build_weight_map(spec, "vllm", "packed")
    whole = walk.to_target(table, tensors.__getitem__)
    tp_only = {r: walk.to_target(table, tensors.__getitem__, walk.Parallel(r, 2)) for r in (0, 1)}
    per_rank = table.NUM_EXPERTS // 2
    experts = {p.name for p in table.PARAMS if p.experts}
    expert_names = {walk.fill(pattern, layer) for pattern in experts for layer in range(spec.num_layers)}
    for rank in (0, 1):
        spread = walk.to_target(table, tensors.__getitem__, walk.Parallel(rank, 2, rank, 2, experts_whole=True))
        assert spread.keys() == whole.keys() and expert_names & spread.keys()
        for name, value in spread.items():
            if name in expert_names:
                assert torch.equal(value, whole[name][rank * per_rank : (rank + 1) * per_rank]), name
            else:
                assert torch.equal(value, tp_only[rank][name]), name


def test_experts_split_problem_names_the_scale_group_no_rank_can_halve():
    """At synth's tiny widths an expert row has one 32-element MXFP4 scale group: it splits over one rank only."""
    from dayone.synth.scale import scaled_spec

    table = build_weight_map(scaled_spec(load_spec("kimi-k3"), "tiny", 4), "vllm", "packed")
    assert walk.experts_split_problem(table, 1) is None
    problem = walk.experts_split_problem(table, 2)
    assert problem is not None and "weight_scale: 1 does not split over 2 tensor-parallel ranks" in problem
