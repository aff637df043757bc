"""A spec derived from a checkpoint is named after the model, never after the folder it was read from: the package,
module and command names generated from it come from config.json's model_type and the model's size, or from the
shipped spec it is (dayone.checkpoint.spec_source.model_name)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from checkpoints import synthesize
from cli_runner import integrate
from dayone.checkpoint.spec_source import model_name, size_label
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.registry import list_specs, load_spec
from safetensors import safe_open

ONE_THREAD = {"OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize(
    ("count", "text"),
    [(999, "999"), (1_000, "1k"), (307_123, "307k"), (5_142_912, "5.1m"), (9_960_000, "10m"),
     (48_000_000_000, "48b"), (105_364_019_968, "105b"), (2_779_931_837_184, "2.8t")],
)  # fmt: skip
def test_sizes_read_as_model_names_write_them(count, text):
    assert size_label(count) == text


@pytest.mark.parametrize("name", list_specs())
def test_a_release_config_is_named_as_its_shipped_spec(name):
    """The config.json a shipped spec's release has derives back under that spec's name (not <type>-<size>): its
    release facts (repo, shards) are not in a config and do not count."""
    shipped = load_spec(name)
    derived = derive_spec(to_hf_config(shipped), "anything")
    assert derived.release != shipped.release and model_name(derived) == name


@pytest.fixture(scope="module")
def two_folders(tmp_path_factory) -> tuple[Path, Path]:
    """One tiny K3 checkpoint in a folder named `ck` and a copy named `tiny`."""
    root = tmp_path_factory.mktemp("names")
    synthesize(root / "ck", "kimi-k3", "--scale", "tiny", "--layers", "4", "--shards", "1")
    shutil.copytree(root / "ck", root / "tiny")
    return root / "ck", root / "tiny"


def test_a_checkpoint_is_named_after_its_model_wherever_it_lies(two_folders):
    names = []
    for folder in two_folders:
        derived = integrate("spec", "derive", folder, "--json", env=ONE_THREAD)
        assert derived.code == 0, derived.err
        names.append(json.loads(derived.out)["spec"]["name"])
    assert names[0] == names[1] == f"kimi-k3-{_counted(two_folders[0])}"


def test_generated_names_come_from_the_model(two_folders, tmp_path):
    """`integrate generate tiny`: no package, module or header holds the folder's name (`tiny`, or `ck`)."""
    _, tiny = two_folders
    result = integrate("generate", tiny, "--target", "vllm", "--target", "sglang", "-o", tmp_path / "gen", "--json",
                       env=ONE_THREAD)  # fmt: skip
    assert result.code == 0, result.err
    name = json.loads(result.out)["spec"]
    assert name.startswith("kimi-k3-") and name != "kimi-k3"
    snake = re.sub(r"[^a-z0-9]", "_", name)
    for target in ("vllm", "sglang"):
        root = tmp_path / "gen" / target
        assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [f"dayone_{snake}_{target}"]
        project = (root / "pyproject.toml").read_text()
        assert f'name = "dayone-{name}-{target}"' in project
        for path in root.rglob("*"):
            assert "tiny" not in str(path.relative_to(tmp_path))
            if path.suffix in (".py", ".toml"):
                assert "dayone_tiny" not in path.read_text() and "dayone-tiny" not in path.read_text()


def _counted(folder: Path) -> str:
    """The checkpoint's size counted from its shard headers alone (not from dayone's manifest), as model names give
    it: every stored parameter (an MXFP4 byte holds two, its scales none) and those a token uses, the language
    model's tensors with only experts_per_token / num_experts of the routed experts'."""
    text = json.loads((folder / "config.json").read_text())["text_config"]
    share = text["num_experts_per_token"] / text["num_experts"]
    total = dense = routed = 0
    for shard in folder.glob("*.safetensors"):
        with safe_open(str(shard), "pt") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                shape = f.get_slice(key).get_shape()
                n = 0 if key.endswith("weight_scale") else _prod(shape) * (2 if key.endswith("weight_packed") else 1)
                total += n
                if not key.startswith("language_model."):
                    continue  # the vision tower: in the total, not in what a token activates
                if re.search(r"\.experts\.\d+\.", key):
                    routed += n
                else:
                    dense += n
    return f"{size_label(total)}-a{size_label(dense + round(routed * share))}"


def _prod(shape) -> int:
    out = 1
    for n in shape:
        out *= n
    return out
