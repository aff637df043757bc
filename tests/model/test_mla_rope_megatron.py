"""Rotary MLA in megatron-core 0.16.1 (the peer in .venv/peers/megatron): a two-layer K3-shaped spec with YaRN rope
(cos/sin amplitude and softmax mscale both active: mscale 1, mscale_all_dim 0.7; 18 tokens across a 16-token original
context) built by `dayone.programs.megatron.verify` on a gloo CPU rank, whose per-token log-probs must agree with the
reference tier (itself checked against transformers' DeepseekV3Attention in test_mla_rope.py) within 1e-5 in fp32.
With megatron-core left NoPE the same check reads 0.24 (measured once when this test was written)."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from dayone.adapters.megatron.config import NoMegatronForm, configure, model_fields, rope_fields
from dayone.adapters.megatron.peer import peer_path
from dayone.programs.megatron.runner import peer_environment
from dayone.spec.registry import load_spec, spec_to_yaml
from model_fixtures import with_updates

PEER = peer_path()
YARN = {"kind": "yarn", "factor": 32.0, "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0,
        "mscale": 1.0, "mscale_all_dim": 0.7}  # fmt: skip


def rope_k3(rope: dict):
    k3 = load_spec("kimi-k3")
    updates = {"name": "kimi-k3-rope", "num_layers": 2, "layout": {"attention": "2 x [mla]", "ffn": "[dense] + [moe]"},
               "mla": {"nope": False, "rope": rope}}  # fmt: skip
    return with_updates(k3, updates)


def test_megatron_rotary_mla_matches_the_reference_tier(tmp_path):
    assert (PEER / "megatron_core-0.16.1.dist-info").is_dir(), "run bash .ci/setup.d/30-megatron.sh"
    path = tmp_path / "kimi-k3-rope.yaml"
    path.write_text(spec_to_yaml(rope_k3({"theta": 50000.0, "scaling": YARN})))
    env = peer_environment(PEER)
    proc = subprocess.run([sys.executable, "-P", "-m", "dayone.programs.megatron.verify", str(path)], capture_output=True,
                          text=True, env=env, timeout=600, check=False)  # fmt: skip
    start = proc.stdout.find("{")
    report = json.loads(proc.stdout[start:]) if start >= 0 else {}
    assert report, proc.stderr[-3000:]
    assert report["failures"] == [] and proc.returncode == 0
    assert report["layers"] == 2 and report["tokens"] > 16
    assert report["logprob_abs_diff_max"] < 1e-5
    assert report["megatron_train_rollout_logprob_abs_diff_max"] < 1e-5


def test_megatron_fields_carry_the_rope():
    fields = model_fields(rope_k3({"theta": 50000.0, "scaling": YARN}))
    assert fields["rope_type"] == "yarn" and fields["rotary_base"] == 50000.0 and fields["rotary_scaling_factor"] == 32
    assert (fields["mscale"], fields["mscale_all_dim"], fields["original_max_position_embeddings"]) == (1.0, 0.7, 16)
    plain = model_fields(rope_k3({"theta": 10000.0}))
    assert plain["rope_type"] == "rope" and plain["rotary_base"] == 10000.0
    nope = model_fields(load_spec("kimi-k3"))
    assert nope["rope_type"] == "rope" and "rotary_base" not in nope  # replaced by zero angles in adapters/megatron


def test_miles_plugin_configure_sets_the_rope():
    """Miles builds the config from Megatron arguments, which name no rotary field: megatron-core's defaults (rope,
    base 10000) until the plugin's configure() sets the spec's."""
    spec = rope_k3({"theta": 50000.0, "scaling": YARN})
    from_arguments = {name: value for name, value in model_fields(spec).items() if name not in rope_fields(spec)}
    config = SimpleNamespace(**from_arguments, rope_type="rope", rotary_base=10000, rotary_scaling_factor=1.0)
    configure(config, spec)
    assert {name: getattr(config, name) for name in rope_fields(spec)} == rope_fields(spec)
    assert config.rope_type == "yarn" and config.rotary_base == 50000.0 and config.mscale_all_dim == 0.7


def test_half_split_rope_is_refused_in_one_line():
    # An InputError (one line and exit 2 from generate, like the router refusals), and still a ValueError
    with pytest.raises(NoMegatronForm, match=r"mla.rope.interleave false has no megatron-core form") as err:
        model_fields(rope_k3({"theta": 10000.0, "interleave": False}))
    assert "\n" not in str(err.value)
