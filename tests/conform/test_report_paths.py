"""conform's reports travel (dashboard, release assets): the driver names this machine's folders instead of spelling
them out, and only folders: a checkpoint given as a short relative path ("ck") is not cut out of ordinary words.

The probe here is a stand-in script run by the real driver (no engine): it fails "loaded" with a message holding the
checkpoint's absolute path and words that contain the folder's name, as vLLM's and SGLang's errors do."""

from __future__ import annotations

import sys
import textwrap

from dayone.conform import driver, peers
from dayone.spec.registry import load_spec

PROBE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    checkpoint = args["--checkpoint"]
    detail = f"{checkpoint}/model-1.safetensors: the checkpoint's block_sparse_moe weights have no layout"
    levels = {name: {"status": "pass", "detail": "ok"} for name in ("discovered", "accepted", "built")}
    levels["loaded"] = {"status": "fail", "detail": detail}
    levels["forward"] = {"status": "not run", "detail": "an earlier level failed"}
    run = {"framework": "vllm", "version": "0", "world_size": int(args["--world-size"]), "facts": {},
           "levels": levels}
    Path(args["--out"], "levels.json").write_text(json.dumps(run))
""")


def test_a_relative_checkpoint_is_named_not_cut_out_of_words(tmp_path, monkeypatch):
    (tmp_path / "ck").mkdir()
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(peers, "peer_python", lambda target: sys.executable)
    monkeypatch.setattr(peers, "install_adapter", lambda *args: None)
    monkeypatch.setattr(peers, "probe_script", lambda target: probe)
    monkeypatch.setattr(peers, "forward_script", lambda target: None)

    report = driver.conform_target("vllm", tmp_path / "adapter", "ck", load_spec("kimi-k3"), world_sizes=(1,))

    detail = report.runs[0].levels["loaded"].detail
    assert detail == "<checkpoint>/model-1.safetensors: the checkpoint's block_sparse_moe weights have no layout"
    assert str(tmp_path) not in report.model_dump_json()
