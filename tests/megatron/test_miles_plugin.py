"""The generated Miles package used as Miles uses it, in the megatron peer (`dayone.programs.megatron.check_miles`): its arguments are all
megatron-core config fields or Megatron-LM flags Miles passes, its `--spec` plugin builds megatron-core's GPTModel,
and the weight-sync converter fed that model's parameters gives back the release's names and bytes. The dispatch
patch is pinned to a Miles commit and file blob."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

from dayone.adapters.megatron.peer import RELEASE, peer_path
from dayone.adapters.targets import common, megatron_bridge, miles
from dayone.programs.megatron.runner import peer_environment
from dayone.spec.registry import load_spec

PEER = peer_path()


def run_worker(tmp_path, *args: str) -> dict:
    assert (PEER / RELEASE).is_dir(), f"run bash .ci/setup.d/30-megatron.sh ({PEER})"
    env = peer_environment(PEER)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dayone.programs.megatron.check_miles", args[0], str(tmp_path), *args[1:]],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line)


def test_miles_package_builds_the_model_and_syncs_release_weights(tmp_path):
    report = run_worker(tmp_path, "kimi-k3")
    print(report)
    assert report["failures"] == []
    assert report["arguments"] > 20 and report["synced_tensors"] > 100


def test_an_argument_megatron_does_not_accept_is_named(tmp_path):
    report = run_worker(tmp_path, "kimi-k3", "--layers", "2", "--plant-argument", "kda-gate")
    assert report["failures"] == [
        "--kda-gate is neither a megatron-core TransformerConfig field nor a Megatron-LM flag"
    ]


def test_dispatch_patch_is_pinned_and_reaches_the_generated_converter():
    """Applying the patch needs Miles' file at MILES_COMMIT, which CI cannot fetch: this checks what the patch says;
    `git apply --check` against radixark/miles@c7969ad1f (blob MILES_DISPATCH_BLOB) was run when it was written."""
    spec = load_spec("kimi-k3")
    files = miles.files(spec)
    patch = files["miles_megatron_to_hf.patch"]
    package = common.package_name(spec, "miles")
    first, diff = patch.split("\n", 1)
    assert miles.MILES_COMMIT in first and miles.MILES_DISPATCH_BLOB in first and not first.startswith(("-", "+", "@"))
    assert diff.startswith(f"--- a/{miles.MILES_DISPATCH}\n+++ b/{miles.MILES_DISPATCH}\n@@ -33,6 +33,9 @@\n")
    added = [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == [
        f'    if model_name == "{miles.model_name(spec)}":',
        f"        from {package}.convert import convert_kimi_k3_to_hf",
        "        return convert_kimi_k3_to_hf(args, name, param)",
    ]
    assert "def convert_kimi_k3_to_hf(args, name: str, param: torch.Tensor)" in files[f"{package}/convert.py"]
    assert f"--model-name {miles.model_name(spec)}" in files["scripts/models/kimi-k3.sh"]
    assert len(miles.MILES_COMMIT) == 40 and len(miles.MILES_DISPATCH_BLOB) == 40


def test_one_converter_name_everywhere():
    """The Miles model name is derived once (`miles.model_name`): the patch's dispatch, the model script, the
    package docstring and the model card's usage all say it, and nothing says another `--model-name`. The
    Megatron-Bridge usage calls register() (importing the package registers nothing)."""
    spec = load_spec("kimi-k3")
    files = miles.files(spec)
    name = miles.model_name(spec)
    package = common.package_name(spec, "miles")
    usage = common.environment().get_template("package/usage.md.j2").module.usage
    framework = SimpleNamespace(extra="megatron-core", checked="megatron-core 0.16.1")
    card = usage("miles", package.replace("_", "-"), package, spec, framework, "kimi_k3")
    texts = {"patch": files["miles_megatron_to_hf.patch"], "sh": files["scripts/models/kimi-k3.sh"],
             "init": files[f"{package}/__init__.py"], "card": card}  # fmt: skip
    assert f'model_name == "{name}"' in texts["patch"]
    for where, text in texts.items():
        if where != "patch":
            assert f"--model-name {name}" in text, where
        assert set(re.findall(r"--model-name (\S+?)[;.`)\s]", text)) <= {name}, where
    bridge_package = common.package_name(spec, "megatron-bridge")
    bridge_card = usage("megatron-bridge", "x", bridge_package, spec, framework, "kimi_k3")
    assert f"{bridge_package}.register()" in bridge_card
    assert "register()" in megatron_bridge.files(spec)[f"{bridge_package}/__init__.py"]
