"""Router fields and megatron-core 0.16.1's top-k: grouped routing reaches the Megatron targets as the spec's routing
(megatron-core ranks a group by its best topk // group_topk scores, the spec by its best two), and what megatron-core
cannot express is refused before anything is written, in one line naming the field (exit 2 from the CLI).

The grouped check runs megatron-core's own routing function (moe_utils.topk_routing_with_score_function, the peer
in .venv/peers/megatron) on the tiny stand-in's config and compares the chosen experts with the reference tier's
Router on the same logits: the same set of experts for every token, and weights within 1e-6 (fp32)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dayone.adapters.megatron.config import model_fields, router_refusals
from dayone.adapters.megatron.peer import RELEASE, peer_path
from dayone.adapters.targets import megatron_bridge, miles
from dayone.core.errors import InputError
from dayone.programs.megatron.runner import peer_environment
from dayone.programs.megatron.verify import tiny_stand_in
from dayone.spec.registry import load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec

ROOT = Path(__file__).resolve().parents[2]
PEER = peer_path()


def kimi_linear_router(**router) -> ModelSpec:
    data = spec_to_dict(load_spec("kimi-linear-48b-a3b"))
    k = router.pop("experts_per_token", data["moe"]["experts_per_token"])
    data["moe"]["experts_per_token"] = k
    data["moe"]["router"].update(router)
    return ModelSpec.model_validate(data)


@pytest.mark.parametrize("generate", [miles.files, megatron_bridge.files], ids=["miles", "megatron-bridge"])
@pytest.mark.parametrize(
    ("router", "field"),
    [
        ({"activation": "sigmoid", "renormalize": False}, "moe.router.renormalize"),
        ({"num_groups": 4, "topk_groups": 2, "experts_per_token": 8}, "moe.router.topk_groups"),
        ({"num_groups": 4, "topk_groups": 2, "experts_per_token": 4, "activation": "softmax"}, "moe.router.num_groups"),
    ],
    ids=["sigmoid-unnormalised", "groups-top4-of-group", "softmax-groups-on-logits"],
)
def test_router_without_megatron_form_is_refused_in_one_line(generate, router, field):
    spec = kimi_linear_router(**router)
    with pytest.raises(InputError, match=field) as err:
        generate(spec)
    assert "\n" not in str(err.value) and "megatron-core" in str(err.value)


def test_refusal_through_integrate_generate_writes_nothing(tmp_path):
    spec = kimi_linear_router(activation="sigmoid", renormalize=False)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_to_dict(spec), sort_keys=False))
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "integrate"), "generate", str(path), "--target", "all", "-o", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "moe.router.renormalize" in lines[0]
    assert not out.exists() or not any(out.iterdir())


def test_expressible_grouping_maps_to_megatron_group_fields():
    spec = kimi_linear_router(num_groups=4, topk_groups=2, experts_per_token=4)
    assert router_refusals(spec) == []
    fields = model_fields(spec)
    assert (fields["moe_router_num_groups"], fields["moe_router_group_topk"], fields["moe_router_topk"]) == (4, 2, 4)


def test_tiny_stand_in_keeps_the_grouped_routing():
    """The checks' tiny model routes as the spec does: its top-k per selected group stays 2 (the tiny scale alone
    would make it top-2 of 2 groups, one per group, which megatron-core ranks differently from the spec)."""
    spec = tiny_stand_in(kimi_linear_router(num_groups=4, topk_groups=2, experts_per_token=4))
    router = spec.moe.router
    assert (router.num_groups, router.topk_groups, spec.moe.experts_per_token) == (4, 2, 4)
    assert spec.moe.num_experts % router.num_groups == 0 and spec.moe.num_experts > spec.moe.experts_per_token
    assert router_refusals(spec) == []


ROUTING_SCRIPT = """
import json, sys, torch
from dayone.adapters.megatron.config import transformer_config
from dayone.programs.megatron.verify import tiny_stand_in
from dayone.adapters.model.config import get_tier
from dayone.adapters.model.moe import Router
from dayone.spec.registry import load_spec
from megatron.core.transformer.moe.moe_utils import topk_routing_with_score_function

spec = tiny_stand_in(load_spec(sys.argv[1]))
config = transformer_config(spec, cpu=True)
router = Router(spec, get_tier("reference"))
torch.manual_seed(0)
for t in router.state_dict().values():
    t.copy_(torch.randn_like(t) * 0.5)
x = torch.randn(256, spec.hidden_size)
logits, ids, weights, _ = router(x)
probs, routing_map = topk_routing_with_score_function(
    logits, config.moe_router_topk, use_pre_softmax=config.moe_router_pre_softmax,
    num_groups=config.moe_router_num_groups, group_topk=config.moe_router_group_topk,
    scaling_factor=config.moe_router_topk_scaling_factor, score_function=config.moe_router_score_function,
    expert_bias=router.e_score_correction_bias if spec.moe.router.correction_bias else None)
mine = torch.zeros_like(probs).scatter_(1, ids, weights)
print(json.dumps({"same_experts": bool(torch.equal(routing_map.bool(), mine != 0)),
                  "weight_abs_diff_max": float((probs - mine).abs().max())}))
"""


@pytest.mark.parametrize("correction_bias", [False, True], ids=["no-bias", "bias"])
def test_megatron_core_routes_grouped_tokens_as_the_reference(tmp_path, correction_bias):
    assert (PEER / RELEASE).is_dir(), f"run bash .ci/setup.d/30-megatron.sh ({PEER})"
    spec = kimi_linear_router(num_groups=4, topk_groups=2, experts_per_token=4, correction_bias=correction_bias)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_to_dict(spec), sort_keys=False))
    env = peer_environment(PEER)
    proc = subprocess.run(
        [sys.executable, "-P", "-c", ROUTING_SCRIPT, str(path)], capture_output=True, text=True, env=env, timeout=300,
        check=False,
    )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
    assert line is not None, proc.stderr[-3000:]
    report = json.loads(line)
    assert report["same_experts"] and report["weight_abs_diff_max"] < 1e-6, report
