"""`integrate package`: the DIST folder, the wheels' metadata, the model card, determinism, bad input."""

from __future__ import annotations

import email
import json
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from cli_runner import PROGRESS, assert_bad_input, integrate
from conftest import REVISION
from dayone.adapters.pins import RELEASES, TARGET_RELEASES
from dayone.package import version as versions
from dayone.package.stage import SUMS
from dayone.reports.files import load_reports

TARGETS = ("sglang", "vllm", "miles", "megatron-bridge")
VERSION = f"0.1.0+spec.f020b2a7.rev.{REVISION[:12]}"


def wheel_metadata(path: Path) -> email.message.Message:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(name))


def test_dist_holds_packages_reports_card_and_sums(packaged, outdir):
    dist, doc, _ = packaged
    names = sorted(p.name for p in dist.iterdir())
    packages = {p["target"]: p for p in doc["packages"]}
    assert list(packages) == list(TARGETS)
    expected = {SUMS, "kimi-k3-model-card.md", "kimi-k3-validate.json", "kimi-k3-compile-resources.json"}
    for target, p in packages.items():
        package = "dayone_kimi_k3_" + target.replace("-", "_")
        assert p["version"] == VERSION
        assert p["wheel"] == f"{package}-{VERSION}-py3-none-any.whl"
        assert p["sdist"] == f"{package}-{VERSION}.tar.gz"
        expected |= {p["wheel"], p["sdist"]}
    assert set(names) == expected
    assert all(p.is_file() for p in dist.iterdir())  # flat: `integrate publish` uploads top-level files only
    # the reports are copied byte for byte; the non-report JSON is not
    assert (dist / "kimi-k3-validate.json").read_bytes() == (outdir / "validate.json").read_bytes()
    assert doc["reports"] == [
        {"source": "compile/resources.json", "file": "kimi-k3-compile-resources.json"},
        {"source": "validate.json", "file": "kimi-k3-validate.json"},
    ]


def test_sha256sums_covers_every_file_and_verifies(packaged):
    dist, doc, _ = packaged
    lines = (dist / SUMS).read_text().splitlines()
    listed = [line.split("  ", 1)[1] for line in lines]
    assert listed == sorted(p.name for p in dist.iterdir() if p.name != SUMS)
    assert {name: line.split("  ")[0] for name, line in zip(listed, lines)} == {
        k: v for k, v in doc["files"].items() if k != SUMS
    }
    proc = subprocess.run(["sha256sum", "-c", "--strict", SUMS], check=False, cwd=dist, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_wheels_declare_the_framework_pin_and_entry_points(packaged):
    dist, doc, _ = packaged
    for p in doc["packages"]:
        meta = wheel_metadata(dist / p["wheel"])
        assert meta["Name"] == p["dist_name"] == "dayone-kimi-k3-" + p["target"]
        assert meta["Version"] == VERSION
        releases = [RELEASES[r] for r in TARGET_RELEASES[p["target"]]]
        extra = releases[0].name
        assert meta.get_all("Provides-Extra") == [extra]
        requires = meta.get_all("Requires-Dist")
        assert "torch" in requires
        for r in releases:  # pinned to the release the static check used, as an extra only
            assert f'{r.name}=={r.version}; extra == "{extra}"' in requires
        body = meta.get_payload()
        assert "0123456789abcdef0123456789abcdef01234567" in body
        if p["target"] == "sglang":
            assert "export SGLANG_EXTERNAL_MODEL_PACKAGE=dayone_kimi_k3_sglang" in body
        with zipfile.ZipFile(dist / p["wheel"]) as z:
            entry_points = [n for n in z.namelist() if n.endswith("entry_points.txt")]
            if p["target"] == "vllm":
                text = z.read(entry_points[0]).decode()
                assert "[vllm.general_plugins]\ndayone_kimi_k3_vllm = dayone_kimi_k3_vllm:register" in text
            else:
                assert entry_points == []
            wheel_files = {n for n in z.namelist() if ".dist-info/" not in n}
        with tarfile.open(dist / p["sdist"]) as t:
            root = p["sdist"].removesuffix(".tar.gz")
            sdist_files = {m.name.removeprefix(root + "/") for m in t.getmembers() if m.isfile()}
        assert wheel_files <= sdist_files and {"pyproject.toml", "README.md", "PKG-INFO"} <= sdist_files
        if p["target"] == "miles":  # the model-args script travels as package data
            assert "dayone_kimi_k3_miles/scripts/models/kimi-k3.py" in wheel_files


def test_model_card(packaged):
    dist, _, _ = packaged
    card = (dist / "kimi-k3-model-card.md").read_text()
    assert "KimiK3ForConditionalGeneration" in card and "23 x [kda kda kda mla] + [mla]" in card
    for title in ("SGLang", "vLLM", "Miles", "Megatron-Bridge"):
        assert f"### {title}" in card
    assert "SGLANG_EXTERNAL_MODEL_PACKAGE=dayone_kimi_k3_sglang" in card and "vllm serve <checkpoint>" in card
    assert "FAIL: first break at layer 7, mlp_out: rel_rms rel_rms=2.500e-01 (row bf16_activation)" in card
    assert "| kda_chunk_fwd | BT=64,num_warps=4 | sm_90 | 128 | 98304 | 0 |" in card
    assert "sha256sum -c SHA256SUMS" in card


def test_package_reports(packaged):
    _, doc, report = packaged
    reports = load_reports([report])
    assert [(r.stage, r.target, r.status) for r in reports] == [("package", t, "pass") for t in TARGETS]
    assert reports[1].details["sha256"][doc["packages"][1]["wheel"]] == doc["files"][doc["packages"][1]["wheel"]]


def test_building_twice_gives_the_same_bytes(packaged, outdir, tmp_path):
    dist, _, _ = packaged
    again = tmp_path / "dist"
    result = integrate("package", outdir, "-o", again, "--revision", REVISION)
    assert result.code == 0, result.err
    assert (again / SUMS).read_bytes() == (dist / SUMS).read_bytes()  # SHA256SUMS lists every file's digest
    # the human output names each package's framework extra as pip spells it (brackets kept, nothing added)
    for package in packaged[1]["packages"]:
        assert f"(framework: extra [{package['framework']['extra']}])" in result.out, result.out
    # off a terminal (as here) a timestamped line on stderr as each package's build starts
    said = [line.split(" ", 2)[2] for line in result.err.splitlines() if PROGRESS.match(line)]
    assert said == [
        f"package: {p['dist_name']}: building the sdist, then the wheel from it" for p in packaged[1]["packages"]
    ]


def test_public_version_and_rebuild_replaces_dist(outdir, tmp_path):
    one = tmp_path / "out"
    shutil.copytree(outdir / "vllm", one / "vllm")  # one adapter is enough here
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "stale.whl").write_text("left from an earlier run")
    result = integrate("package", one, "-o", dist, "--public-version", "--json", "--spec", "kimi-k3")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert [(p["target"], p["version"]) for p in doc["packages"]] == [("vllm", "0.1.0")]
    assert sorted(p.name for p in dist.iterdir()) == sorted(doc["files"])
    assert not (dist / "stale.whl").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "out"]  # no temporary folders left


@pytest.mark.parametrize(
    ("revision", "label"),
    [(REVISION, "0123456789ab"), ("ABCDEF1", "abcdef1"), ("main", "main"), ("v1.2_rc/3", "v1.2.rc.3")],
)
def test_version_scheme(revision, label):
    assert versions.package_version("0.1.0", "f020b2a754ae", revision, False) == f"0.1.0+spec.f020b2a7.rev.{label}"
    assert versions.package_version("0.1.0", "f020b2a754ae", revision, True) == "0.1.0"
    assert versions.package_version("0+unknown", "f020b2a754ae", None, False) == "0+spec.f020b2a7"


def test_bad_input(outdir, tmp_path):
    dist = tmp_path / "dist"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_bad_input(integrate("package", empty, "-o", dist), str(empty), "no generated adapters")
    assert_bad_input(integrate("package", tmp_path / "missing", "-o", dist), "not a folder")
    assert_bad_input(integrate("package", outdir, "-o", dist, "--spec", "no-such-model"), "no-such-model")
    assert_bad_input(
        integrate("package", outdir, "-o", dist, "--spec", "kimi-linear-48b-a3b"), "generated from spec kimi-k3"
    )
    assert_bad_input(integrate("package", outdir, "-o", dist, "--revision", "///"), "--revision")
    assert_bad_input(integrate("package", outdir, "-o", outdir), "would replace OUTDIR")
    (tmp_path / "busy" / "sub").mkdir(parents=True)
    assert_bad_input(integrate("package", outdir, "-o", tmp_path / "busy"), "has sub-folders")
    assert_bad_input(
        integrate("package", outdir, "-o", dist, env={"SOURCE_DATE_EPOCH": "yesterday"}), "SOURCE_DATE_EPOCH"
    )
    assert not dist.exists()


def test_broken_report_is_bad_input(outdir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(outdir / "sglang", out / "sglang")
    (out / "validate.json").write_text('{"stage": "validate", "spec": "kimi-k3"')
    assert_bad_input(integrate("package", out, "-o", tmp_path / "dist"), "validate.json", "not valid JSON")
    (out / "validate.json").write_text('{"stage": "nonsense", "spec": "kimi-k3", "status": "pass", "created": "x"}')
    assert_bad_input(integrate("package", out, "-o", tmp_path / "dist"), "validate.json", "stage")


def test_failed_build_leaves_dist_untouched(outdir, tmp_path, monkeypatch):
    from dayone.package import build, package

    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "old.whl").write_text("the previous release")
    calls = []

    def failing(source, out, epoch, name):
        calls.append(name)
        raise build.BuildError(f"{name}: the build failed: planted", "log")

    monkeypatch.setattr(build, "run_build", failing)
    with pytest.raises(build.BuildError, match="planted"):
        package(outdir, dist)
    assert calls == ["dayone-kimi-k3-sglang"]
    assert [p.name for p in dist.iterdir()] == ["old.whl"]
    assert [p.name for p in tmp_path.iterdir()] == ["dist"]
