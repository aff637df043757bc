"""Family conventions as data: the shipped files, a new model type (kimi_k4) by data alone, hostile files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_runner import assert_bad_input, integrate
from dayone.core.errors import InputError
from dayone.spec.derive import derive_spec, derive_with_conventions
from dayone.spec.family import SHIPPED_DIR, conventions_for, known_model_types
from dayone.spec.registry import json_schema, load_spec
from dayone.spec.schema import Conventions

DATA = Path(__file__).resolve().parents[1] / "data"
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
K4_CONVENTIONS = "# the same architecture, renamed\nextends: kimi_k3\narchitecture: KimiK4ForConditionalGeneration\n"


def k3_config() -> dict:
    return json.loads((DATA / "kimi-k3.config.json").read_text())


def k4_config() -> dict:
    """The published K3 config with the model type and class renamed, as a kimi_k4 release would ship it."""
    config = k3_config()
    config["model_type"] = "kimi_k4"
    config.pop("architectures")  # the class name then comes from the conventions file
    return config


def test_shipped_files_describe_the_shipped_families():
    assert known_model_types() == ["kimi_k3", "kimi_linear"]
    k3, linear = conventions_for("kimi_k3"), conventions_for("kimi_linear")
    assert (k3.source, k3.chain) == (str(SHIPPED_DIR / "kimi_k3.yaml"), (str(SHIPPED_DIR / "kimi_k3.yaml"),))
    assert (k3.text_config, k3.a_log_layout, k3.a_log_pad_to, k3.mla_norm_eps) == (True, "flat", 128, "rms_norm_eps")
    assert (linear.text_config, linear.a_log_layout, linear.mla_norm_eps) == (False, "per_head", 1e-6)
    # what the conventions decide, seen in the specs the published configs derive
    spec, used = derive_with_conventions(k3_config(), "k3")
    assert used == k3 and spec.kda.a_log_shape == (128,) and spec.mla.norm_eps == spec.norm_eps
    assert spec.checkpoint.float32 == k3.float32 and spec.passthrough.prefixes == k3.passthrough


def test_exported_schema_describes_conventions_files():
    """spec/schema.json (kept current by test_shipped_specs) carries the Conventions definition editors check
    conventions files and a spec's `conventions` block with; every shipped file passes the model it was made from."""
    definition = json_schema()["$defs"]["Conventions"]
    assert set(definition["properties"]) == set(Conventions.model_fields)
    assert definition["additionalProperties"] is False
    for path in SHIPPED_DIR.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        assert set(data) <= set(definition["properties"]), path
        Conventions.model_validate(data)


def test_unknown_model_type_is_one_line_naming_the_known(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(k4_config()))
    line = assert_bad_input(integrate("spec", "derive", tmp_path / "config.json"), "'kimi_k4'", "kimi_k3, kimi_linear")
    assert "config.json" in line


def test_kimi_k4_by_a_conventions_file(tmp_path):
    """A new model type goes green by adding data: derive, synth at tiny scale, inspect with coverage."""
    conventions = tmp_path / "conventions"
    conventions.mkdir()
    (conventions / "kimi_k4.yaml").write_text(K4_CONVENTIONS)
    (tmp_path / "config.json").write_text(json.dumps(k4_config()))
    derived = integrate("spec", "derive", tmp_path / "config.json", "--conventions", conventions, "--json",
                        "-o", tmp_path / "k4.yaml")  # fmt: skip
    assert derived.code == 0, derived.err
    report = json.loads(derived.out)
    assert report["conventions"] == {
        "model_type": "kimi_k4",
        "source": str(conventions / "kimi_k4.yaml"),
        "extends": [str(SHIPPED_DIR / "kimi_k3.yaml")],
    }
    spec = load_spec(tmp_path / "k4.yaml")
    assert (spec.hf.model_type, spec.hf.architecture) == ("kimi_k4", "KimiK4ForConditionalGeneration")
    k3 = derive_spec(k3_config(), spec.name)
    assert spec.model_dump(exclude={"hf"}) == k3.model_dump(exclude={"hf"})  # the rest is K3's, field for field

    human = integrate("spec", "derive", tmp_path / "config.json", "--conventions", conventions)
    assert human.code == 0 and f"conventions: {conventions / 'kimi_k4.yaml'}" in human.err
    assert load_spec(tmp_path / "k4.yaml") == spec  # the human output's YAML is the same spec

    # Every later command finds the file through $DAYONE_CONVENTIONS: synth writes a config.json it derives back
    # (checked as it is written), inspect derives the spec from the checkpoint and checks coverage against it.
    env = {**ONE_THREAD, "DAYONE_CONVENTIONS": str(conventions)}
    out = tmp_path / "k4-tiny"
    synth = integrate("synth", tmp_path / "k4.yaml", "--scale", "tiny", "--layers", "4", "-o", out, env=env)
    assert synth.code == 0, synth.err
    assert json.loads((out / "config.json").read_text())["model_type"] == "kimi_k4"
    inspect = integrate("inspect", out, "--json", env=env)
    assert inspect.code == 0, inspect.out + inspect.err
    assert_bad_input(integrate("inspect", out, env=ONE_THREAD), "'kimi_k4'")  # and without it, refused


def test_kimi_k4_by_a_spec_block(tmp_path):
    """Or the spec says `conventions: {extends: kimi_k3}`: config.json carries the block, so no search path."""
    data = yaml.safe_load((Path(SHIPPED_DIR).parent / "models" / "kimi-k3.yaml").read_text())
    data.update(name="kimi-k4", conventions={"extends": "kimi_k3"})
    data["hf"].update(model_type="kimi_k4", architecture="KimiK4ForConditionalGeneration")
    (tmp_path / "k4.yaml").write_text(yaml.safe_dump(data))
    out = tmp_path / "k4-tiny"
    synth = integrate("synth", tmp_path / "k4.yaml", "--scale", "tiny", "--layers", "4", "-o", out, env=ONE_THREAD)
    assert synth.code == 0, synth.err
    config = json.loads((out / "config.json").read_text())
    assert config["dayone"] == {"conventions": {"extends": "kimi_k3"}}
    assert integrate("inspect", out, env=ONE_THREAD).code == 0
    derived = integrate("spec", "derive", out, "--json", env=ONE_THREAD)
    assert derived.code == 0, derived.err
    report = json.loads(derived.out)
    assert report["conventions"]["source"].endswith("config.json: conventions")
    assert report["conventions"]["extends"] == [str(SHIPPED_DIR / "kimi_k3.yaml")]
    assert report["spec"]["conventions"] == {"extends": "kimi_k3"}


def test_extends_overrides_and_inherits(tmp_path):
    (tmp_path / "kimi_k4.yaml").write_text("extends: kimi_k3\nprefix: model.\nfloat32: []\nmla_norm_eps: 1.0e-6\n")
    (tmp_path / "kimi_k5.yaml").write_text("extends: kimi_k4\nlm_head: lm_head.weight\n")
    k5 = conventions_for("kimi_k5", [tmp_path])
    assert (k5.prefix, k5.lm_head, k5.float32, k5.mla_norm_eps) == ("model.", "lm_head.weight", (), 1e-6)
    assert (k5.a_log_pad_to, k5.passthrough) == (128, ("vision_tower.", "mm_projector."))  # from kimi_k3
    assert k5.chain == tuple(str(p) for p in (tmp_path / "kimi_k5.yaml", tmp_path / "kimi_k4.yaml",
                                                SHIPPED_DIR / "kimi_k3.yaml"))  # fmt: skip
    config = k3_config()
    config["model_type"] = "kimi_k5"
    spec = derive_spec(config, "k5", conventions_dirs=[tmp_path])
    assert (spec.checkpoint.prefix, spec.checkpoint.lm_head, spec.mla.norm_eps) == ("model.", "lm_head.weight", 1e-6)
    assert spec.hf.architecture == "KimiK3ForConditionalGeneration"  # the config's own architectures win


def test_mla_use_nope_default_is_the_familys(tmp_path):
    """A config.json without mla_use_nope is derived as its family's conventions say: NoPE for the Kimi families
    (shipped files), rotary MLA for a DeepSeek-V3-like family whose file says mla_use_nope: false; a config that
    states mla_use_nope wins over either."""
    assert conventions_for("kimi_k3").mla_use_nope is True and conventions_for("kimi_linear").mla_use_nope is True
    (tmp_path / "deepseek_like.yaml").write_text("extends: kimi_k3\nmla_use_nope: false\n")
    rope = {"rope_theta": 10000.0, "rope_scaling": {"type": "yarn", "factor": 40.0, "mscale": 1.0,
            "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1}}  # fmt: skip

    def silent(model_type: str, **text_fields) -> dict:
        config = k3_config()
        config["model_type"] = model_type
        del config["text_config"]["mla_use_nope"]
        config["text_config"].update(rope, **text_fields)
        return config

    kimi = derive_spec(silent("kimi_k3"), "k3-silent", conventions_dirs=[tmp_path])
    assert kimi.mla.nope is True and kimi.mla.rope is None
    deepseek = derive_spec(silent("deepseek_like"), "ds", conventions_dirs=[tmp_path])
    assert deepseek.mla.nope is False and deepseek.mla.rope.theta == 10000.0
    assert deepseek.mla.rope.scaling.factor == 40.0 and deepseek.mla.rope.interleave is True
    stated = derive_spec(silent("deepseek_like", mla_use_nope=True), "ds-nope", conventions_dirs=[tmp_path])
    assert stated.mla.nope is True and stated.mla.rope is None
    (tmp_path / "kimi_k4.yaml").write_text("extends: kimi_k3\nmla_use_nope: 0\n")
    with pytest.raises(InputError, match="mla_use_nope"):
        conventions_for("kimi_k4", [tmp_path])


def test_search_path_order(tmp_path, monkeypatch):
    """--conventions folders, then $DAYONE_CONVENTIONS, then the shipped: the first file found is the one used."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, prefix in ((first, "a."), (second, "b.")):
        folder.mkdir()
        (folder / "kimi_linear.yaml").write_text(f"extends: kimi_k3\nprefix: {prefix}\n")
    monkeypatch.setenv("DAYONE_CONVENTIONS", str(second))
    assert conventions_for("kimi_linear").prefix == "b."
    assert conventions_for("kimi_linear", [first]).prefix == "a."
    monkeypatch.delenv("DAYONE_CONVENTIONS")
    assert conventions_for("kimi_linear").source == str(SHIPPED_DIR / "kimi_linear.yaml")


HOSTILE = {
    "alias bomb": ("a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n",
                   "aliases"),
    "python tag": ("extends: !!python/object/apply:os.system ['echo owned']\n", "not valid YAML"),
    "not a mapping": ("- extends\n- kimi_k3\n", "mapping"),
    "unknown key": ("extends: kimi_k3\nprefixx: model.\n", "prefixx"),
    "quote in prefix": ("extends: kimi_k3\nprefix: \"model.'); import os #\"\n", "prefix"),
    "path in extends": ("extends: ../../etc/passwd\n", "extends"),
    "string for number": ("extends: kimi_k3\na_log_pad_to: '128'\n", "a_log_pad_to"),
    "missing field": ("prefix: model.\n", "missing field"),
    "cycle": ("extends: kimi_k4\n", "cycle"),
    "missing parent": ("extends: kimi_k9\n", "kimi_k9"),
    "bad yaml": ("extends: [kimi_k3\n", "not valid YAML"),
    "too deep": ("x: " + "[" * 200 + "]" * 200 + "\n", "kimi_k4.yaml"),
    "huge": ("# " + "x" * 70_000 + "\n", "KiB"),
}  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_conventions_file_is_one_line(tmp_path, name, monkeypatch):
    text, fragment = HOSTILE[name]
    (tmp_path / "kimi_k4.yaml").write_text(text)
    monkeypatch.setattr("os.system", lambda *a: pytest.fail("executed"))
    with pytest.raises(InputError) as err:
        conventions_for("kimi_k4", [tmp_path])
    message = str(err.value)
    assert fragment in message and "\n" not in message and "kimi_k4.yaml" in message, message


def test_hostile_conventions_file_through_the_cli(tmp_path):
    (tmp_path / "kimi_k4.yaml").write_bytes(b"extends: kimi_k3\nprefix: \xff\n")
    (tmp_path / "config.json").write_text(json.dumps(k4_config()))
    assert_bad_input(
        integrate("spec", "derive", tmp_path / "config.json", "--conventions", tmp_path), "kimi_k4.yaml", "UTF-8"
    )


def test_conventions_files_ship_as_package_data():
    """pyproject's package-data globs for dayone.spec match every shipped conventions file (a wheel without them
    could derive nothing)."""
    import tomllib
    from fnmatch import fnmatch

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dayone.spec"]
    files = [f"{SHIPPED_DIR.name}/{p.name}" for p in SHIPPED_DIR.glob("*.yaml")]
    assert files and all(any(fnmatch(f, g) for g in globs) for f in files), (files, globs)


def _k4_families(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Three folders with a kimi_k4.yaml each, told apart by the checkpoint prefix their spec gets."""
    folders = tuple(tmp_path / name for name in ("flag", "env", "later"))
    for folder in folders:
        folder.mkdir()
        (folder / "kimi_k4.yaml").write_text(f"{K4_CONVENTIONS}prefix: {folder.name}.\n")
    return folders


def test_derive_reports_the_file_it_used(tmp_path):
    """--conventions and $DAYONE_CONVENTIONS name different files: the one reported (--json and stderr) is the one
    whose fields are in the spec, and it is --conventions'."""
    flag, env, _ = _k4_families(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(k4_config()))
    args = ("spec", "derive", tmp_path / "config.json", "--conventions", flag)
    derived = integrate(*args, "--json", env={"DAYONE_CONVENTIONS": str(env)})
    assert derived.code == 0, derived.err
    report = json.loads(derived.out)
    assert report["conventions"]["source"] == str(flag / "kimi_k4.yaml")
    assert report["spec"]["checkpoint"]["prefix"] == "flag."
    human = integrate(*args, env={"DAYONE_CONVENTIONS": str(env)})
    assert human.code == 0 and human.err.strip().splitlines()[-1] == f"conventions: {flag / 'kimi_k4.yaml'}"
    assert yaml.safe_load(human.out)["checkpoint"]["prefix"] == "flag."


@pytest.mark.parametrize("source", ["config file", "checkpoint folder"])
def test_derive_looks_the_file_up_once(tmp_path, monkeypatch, source):
    """The search path changes right after the derivation found its file ($DAYONE_CONVENTIONS, which holds the
    --conventions folder while the command runs, is replaced): the file reported is still the one the spec was
    derived with, not a second lookup's."""
    import numpy as np
    from click.testing import CliRunner
    from dayone.cli import cli
    from dayone.spec import derive
    from safetensors.numpy import save_file

    flag, env, later = _k4_families(tmp_path)
    checkpoint = tmp_path / "k4"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps(k4_config()))
    save_file({"lm_head.weight": np.zeros(1, np.float32)}, checkpoint / "model.safetensors")
    found = derive.conventions_for

    def then_the_path_changes(*args, **kwargs):
        used = found(*args, **kwargs)
        monkeypatch.setenv("DAYONE_CONVENTIONS", str(later))
        return used

    monkeypatch.setattr(derive, "conventions_for", then_the_path_changes)
    monkeypatch.setenv("DAYONE_CONVENTIONS", str(env))
    target = checkpoint / "config.json" if source == "config file" else checkpoint
    result = CliRunner().invoke(cli, ["spec", "derive", str(target), "--conventions", str(flag), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["spec"]["checkpoint"]["prefix"] == "flag."
    assert report["conventions"]["source"] == str(flag / "kimi_k4.yaml")
