"""The generated Miles and Megatron-Bridge packages used where a trainer uses them: a fresh venv with the package's
wheel and exactly the dependencies it declares (torch, Triton and pydantic at this environment's versions, with what
they require, and megatron-core / megatron-bridge as the peer installs them, --no-deps), no dayone. There the package imports, builds
the model through its own provider (Miles: the --spec plugin over the config Megatron-LM makes from the model
arguments; Megatron-Bridge: register() and the bridge's provider_bridge), loads the synthetic checkpoint through its
own walker, and its per-token log-probs equal dayone's reference tier's within 1e-5 (fp32), computed here.

Megatron-Bridge's registration runs against check_bridge.py's stand-in for model_bridge.py: `import megatron.bridge`
needs TransformerEngine, which this machine has no CUDA build of (tests/megatron/test_bridge_provider.py says so).
"""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from dayone.adapters.megatron import vendor
from dayone.adapters.megatron.peer import RELEASE, peer_path
from dayone.adapters.pins import RELEASES, TARGET_RELEASES
from dayone.adapters.targets import common, megatron_bridge, miles
from dayone.programs.megatron import check_bridge
from dayone.programs.megatron.verify import synthetic_checkpoint, tiny_stand_in
from dayone.spec.registry import load_spec, spec_to_dict
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).parent
PEER = peer_path()
LIMIT = 1e-5
GENERATORS = {"miles": miles, "megatron-bridge": megatron_bridge}
# The main venv's versions of what the packages declare unpinned: the fresh venv gets the same builds (torch
# 2.13.0 is a wheel on disk; the others come from the configured index).
FROM_MAIN = ("torch", "triton", "pydantic")
# What megatron-core (numpy, packaging) and megatron-bridge (rich, transformers: what its conversion modules import)
# need beside the peer's --no-deps install, at the main venv's versions, as the peer runs with them; safetensors
# reads the checkpoint in the worker.
FRAMEWORK_DEPENDENCIES = {"miles": ("numpy", "packaging", "safetensors"),
                          "megatron-bridge": ("numpy", "packaging", "safetensors", "rich", "transformers")}  # fmt: skip


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory) -> Path:
    assert (PEER / RELEASE).is_dir(), f"run bash .ci/setup.d/30-megatron.sh ({PEER})"
    root = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    install(python, FROM_MAIN)
    return python


def install(python: Path, names) -> None:
    """What `pip install NAME==<this environment's version>` puts in the venv, for each name: the distribution and
    every one it requires (markers evaluated, no extras), linked from this environment's site-packages, files and
    metadata, rather than unpacked again (torch's wheel alone took most of a minute to install)."""
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    for dist in requirement_closure(names):
        for top in {Path(f).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}:
            if not (site / top).exists():
                (site / top).symlink_to(Path(dist.locate_file(top)))


def requirement_closure(names) -> list[metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        name = canonicalize_name(dist.metadata["Name"])
        if name in found:
            continue
        found[name] = dist
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(found.values())


@pytest.fixture(scope="module")
def stand_in_and_checkpoint(tmp_path_factory):
    spec = tiny_stand_in(load_spec("kimi-k3"))
    work = tmp_path_factory.mktemp("work")
    tensors = synthetic_checkpoint(spec, work / "checkpoint")
    ids = torch.randint(3, spec.vocab_size, (2, 10), generator=torch.Generator().manual_seed(1))
    (work / "ids.json").write_text(json.dumps(ids.tolist()))
    from dayone.adapters.model import SpecModel, WeightLoader

    ref = SpecModel(spec, "reference")
    WeightLoader(spec, tensors.__getitem__).load(ref)
    with torch.no_grad():
        golden = F.log_softmax(ref(ids).float(), -1)[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    return spec, work, golden


@pytest.fixture(scope="module")
def wheels(stand_in_and_checkpoint, tmp_path_factory) -> dict[str, Path]:
    """`integrate package` of the two targets generated for the tiny stand-in (its spec passed as a file)."""
    spec = stand_in_and_checkpoint[0]
    root = tmp_path_factory.mktemp("packaged")
    for target, generator in GENERATORS.items():
        common.write_tree(root / "out" / target, generator.files(spec))
    (root / "spec.json").write_text(json.dumps(spec_to_dict(spec)))
    integrate = Path(sys.executable).parent / "integrate"
    proc = subprocess.run([integrate, "package", str(root / "out"), "-o", str(root / "dist"), "--spec",
                           str(root / "spec.json")], capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {t: next((root / "dist").glob(f"{common.package_name(spec, t)}-*.whl")) for t in GENERATORS}


def declared(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(meta)).get_all("Requires-Dist") or []


@pytest.mark.parametrize("target", ["miles", "megatron-bridge"])
def test_package_runs_without_dayone(target, fresh_python, stand_in_and_checkpoint, wheels, tmp_path):
    spec, work, golden = stand_in_and_checkpoint
    package = common.package_name(spec, target)
    wheel = wheels[target]
    requires = declared(wheel)
    releases = [RELEASES[r] for r in TARGET_RELEASES[target]]
    # what the copied model imports, and the framework as an extra pinned to the releases table
    assert sorted(r for r in requires if "extra ==" not in r) == sorted(vendor.REQUIREMENTS)
    assert sorted(r for r in requires if "extra ==" in r) == sorted(
        f'{r.name}=={r.version}; extra == "{releases[0].name}"' for r in releases
    )
    venv_dir = fresh_python.parents[1]
    install(fresh_python, FRAMEWORK_DEPENDENCIES[target])
    target_dir = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target_dir), str(wheel)],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    case = tmp_path / "case"
    case.mkdir()
    for item in ("checkpoint", "ids.json"):
        (case / item).symlink_to(work / item)
    if target == "miles":
        margs = [(f, v) for f, v in miles.model_args(spec) if v is not None and v is not False]
        function = dict(margs)["spec"].split()[1]
        (case / "config.json").write_text(json.dumps({"args": margs, "spec_function": function}))
    env = {"PATH": f"{venv_dir / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": f"{target_dir}:{PEER}",
           "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1", "HOME": os.environ.get("HOME", "/tmp")}  # fmt: skip
    proc = subprocess.run(
        [fresh_python, str(HERE / "standalone_worker.py"), target, package, str(case), str(Path(check_bridge.__file__).parent)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    assert (case / "logprobs.json").is_file(), proc.stderr[-3000:]
    report = json.loads((case / "logprobs.json").read_text())
    assert report["dayone_importable"] is False and report["dayone_imported"] == []
    assert report["missing"] == [] and report["unexpected"] == []
    diff = (torch.tensor(report["logprobs"]) - golden).abs().max()
    print(target, "log-prob |diff| max", float(diff))
    assert diff < LIMIT
    if target == "miles":
        assert report["megatron_bridge_imported"] is False
