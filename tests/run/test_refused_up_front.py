"""A spec field a target cannot honour stops `integrate run` before any stage runs: one line, exit 2, no stage
folder written (it used to run synth, spec, coverage and plan, then fail at generate with exit 1)."""

from __future__ import annotations

import yaml
from cli_runner import assert_bad_input, integrate
from dayone.spec.registry import load_spec, spec_to_dict


def test_an_unhonoured_router_is_refused_before_synth(tmp_path):
    data = spec_to_dict(load_spec("kimi-k3"))
    data["name"] = "k3-two-groups"
    # softmax scores, 8 groups, the best 2 kept: SGLang and vLLM route it (group-limited top-k), megatron-core
    # cannot (it ranks groups by their best experts_per_token / topk_groups scores)
    data["moe"]["router"].update({"activation": "softmax", "num_groups": 8, "topk_groups": 2})
    spec = tmp_path / "variant.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    line = assert_bad_input(integrate("run", "--demo", "--spec", str(spec), "-o", str(out)), "moe.router.topk_groups 2")
    assert "before any stage ran" in line
    assert not (out / "stages").exists()


def test_the_same_spec_runs_for_the_engines_that_honour_it(tmp_path):
    """Only the targets asked for are asked: the engines alone take the router (their generators accept it)."""
    from dayone.adapters.targets.refusals import refusals

    data = spec_to_dict(load_spec("kimi-k3"))
    data["moe"]["router"].update({"activation": "softmax", "num_groups": 8, "topk_groups": 2})
    from dayone.spec.schema import ModelSpec

    spec = ModelSpec.model_validate(data)
    assert refusals("vllm", spec) == [] and refusals("sglang", spec) == []
    assert refusals("miles", spec) and refusals("megatron-bridge", spec)
