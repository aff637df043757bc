"""The SGLang probe's reason for a rope SGLang's CPU rotary embedding refuses (get_rope_cpu asserts on anything but
a deepseek_yarn-scaled rope) names the rope it was given: unscaled, or scaled another way (a YaRN rope passed as
rope_type "yarn", as an HF config writes it), never "unscaled" for a scaled one. SGLang 0.5.23's own get_rope_cpu,
in its peer environment, raises the refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv" / "peers" / "sglang" / "bin" / "python"
PROBE = ROOT / "pipeline" / "programs" / "engines" / "sglang_probe.py"
YARN = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 32768}
DEEPSEEK_YARN = {**YARN, "rope_type": "deepseek_yarn"}

# In the peer: the probe's rotary import (CPU engine on for that package), then SGLang's own factory on each rope.
SCRIPT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("sglang_probe", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
probe.import_rotary_with_cpu_engine()
from sglang.srt.layers.rotary_embedding.factory import get_rope_wrapper
reasons = []
for scaling in json.loads(sys.argv[2]):
    try:
        get_rope_wrapper(16, 16, 65536, 50000.0, False, rope_scaling=scaling, device="cpu")
        reasons.append("built")
    except AssertionError as err:
        reasons.append(probe.cpu_rope_refusal(err))
try:
    assert False, "another assertion"
except AssertionError as err:
    reasons.append(probe.cpu_rope_refusal(err))
print(json.dumps(reasons))
"""


def test_the_refusal_names_the_rope_it_was_given():
    if not PEER_PYTHON.is_file():
        raise AssertionError(f"{PEER_PYTHON} is missing: run .ci/setup.d/11-sglang.sh")
    ropes = [None, YARN, DEEPSEEK_YARN]
    proc = subprocess.run([str(PEER_PYTHON), "-c", SCRIPT, str(PROBE), json.dumps(ropes)], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    unscaled, yarn, deepseek_yarn, other = json.loads(proc.stdout.splitlines()[-1])
    assert "get_rope_cpu" in unscaled and "unscaled" in unscaled
    assert "unscaled" not in yarn and "get_rope_cpu" in yarn
    assert "rope_type 'yarn'" in yarn and "factor 32.0" in yarn and "original_max_position_embeddings 32768" in yarn
    assert "Only deepseek_yarn is supported for CPU" in yarn  # SGLang's own assertion message, carried
    assert "\n" not in unscaled + yarn
    assert deepseek_yarn == "built"  # the rope the generated adapters pass for a YaRN spec: SGLang's CPU builds it
    assert other is None  # an assertion elsewhere is not a rope refusal: the probe reports it as a failure
