"""The generated SGLang / vLLM load_weights (loading.py walking weight_table.py) against the engines' weight_loader
contract, emulated on the CPU, for what the real frameworks cannot show here: tensor parallelism 4 and 8 and
expert parallelism 2 (the conformance runs in tests/conform build and load in vLLM itself, but a CPU machine runs
world sizes 1 and 2 and no expert-parallel group). The parameters of every rank equal the table's own placement,
every element is written once, and derived tensors are rebuilt after loads and weight updates."""

from __future__ import annotations

import pytest
import torch
from dayone.adapters.weightmap import walk
from dayone.adapters.weightmap.check import stale_derived
from engine_emulator import EngineModel
from generate_fixtures import load


def _engine(generated, target: str, par: walk.Parallel):
    package = f"dayone_kimi_k3_{target}"
    table = load(generated[target], f"{package}.weight_table")
    loading = load(generated[target], f"{package}.loading")
    return table, loading, EngineModel(table, par)


@pytest.mark.parametrize("target", ["sglang", "vllm"])
@pytest.mark.parametrize("tp,ep", [(4, 2), (8, 2)])
def test_load_weights_fills_every_parameter_of_every_rank(k3, generated, target, tp, ep):
    tensors = k3[1]
    for rank in {(0, 0), (tp - 1, ep - 1)}:
        par = walk.Parallel(rank[0], tp, rank[1], ep)
        table, loading, model = _engine(generated, target, par)
        # the checkpoint streamed in reverse, so scales arrive before their packed twins
        loader = loading.TableLoader(table, model)
        written = loader.load(reversed(list(tensors.items())))
        assert written == {name for name, _ in model.named_parameters()}
        assert loader.passed_through == {n for n in tensors if n.startswith(("vision_tower.", "mm_projector."))}
        expected = walk.to_target(table, tensors.__getitem__, par)
        for name, param in model.named_parameters():
            assert torch.equal(param.data, expected[name]), f"{name} at rank {rank}"
            count = _unpadded(model.writes[name], model.decls[name], par)
            # through its weight_loader, once: vLLM's in-place reload counts loader writes (q_a + kv_a included)
            assert bool((count == 1).all()), f"{name}: written {int(count.max())} times"
        assert stale_derived(table, model) == []


def _loaded(k3, generated, target: str):
    """The checkpoint's tensors, and the engine model of `target` (one rank) after a first full load by its loader."""
    tensors = k3[1]
    table, loading, model = _engine(generated, target, walk.Parallel())
    loader = loading.TableLoader(table, model)
    loader.load(tensors.items())
    return tensors, table, model, loader


def test_weight_update_refreshes_derived_tensors(k3, generated):
    tensors, table, model, loader = _loaded(k3, generated, "sglang")
    kv_b = next(n for n in tensors if n.endswith("layers.3.self_attn.kv_b_proj.weight"))
    norm = next(n for n in tensors if n.endswith("layers.2.self_attention_res_norm.weight"))
    update = {kv_b: tensors[kv_b] * 2, norm: tensors[norm] + 1}
    loader.load(update.items())  # update_weights_from_tensor calls load_weights with the changed tensors only
    assert stale_derived(table, model) == []
    w_kc = model.get_submodule(kv_b.removesuffix(".kv_b_proj.weight")).w_kc
    assert torch.equal(w_kc, walk.derive("mla_w_kc", [update[kv_b]], (8, 16, 16)))


def test_an_update_of_one_fused_part_keeps_the_others(k3, generated):
    tensors, table, model, loader = _loaded(k3, generated, "vllm")
    q_a = next(n for n in tensors if n.endswith("layers.3.self_attn.q_a_proj.weight"))
    loader.load([(q_a, tensors[q_a] * 2)])  # kv_a, fused with q_a in one parameter, is not in the update
    expected = walk.to_target(table, ({**tensors, q_a: tensors[q_a] * 2}).__getitem__, walk.Parallel())
    for name, param in model.named_parameters():
        assert torch.equal(param.data, expected[name]), name


def _unpadded(count: torch.Tensor, decl: walk.Param, par: walk.Parallel) -> torch.Tensor:
    """The write counts of a parameter's rows that parts fill (alignment padding is never written)."""
    if decl.align == 1:
        return count
    return count[: sum(walk.part_sizes(decl, par.tp_size))]
