"""The actions our workflows use, emulated with their documented behaviour (an action not listed here fails the step,
so a workflow cannot use one the harness does not know):

actions/checkout            clone of the origin at the event's commit into the empty workspace (fetch-depth 1)
actions/setup-python        a fresh venv of this Python (same minor version required), put first on PATH
actions/upload-artifact     the folder copied to artifacts/NAME; no files: a warning (if-no-files-found: warn, the
                            default), an error, or nothing (ignore); a name already uploaded in the run fails (v4)
actions/download-artifact   artifacts/NAME copied to `path`; a missing artifact fails ("Artifact not found")
actions/upload-pages-artifact  `path` must be a folder with files; it becomes the run's Pages artifact
actions/deploy-pages        deploys the Pages artifact (fails without one); output page_url
pypa/gh-action-pypi-publish a dry run of PyPI's checks on `packages-dir`: only wheels and sdists, names that match
                            their metadata, no local versions (+label), no file twice
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from gha_runner import JobState, _git


def run_action(state: JobState, uses: str, inputs: dict) -> tuple[bool, str, dict]:
    name = uses.split("@")[0]
    action = ACTIONS.get(name)
    if action is None:
        return False, f"the harness has no emulation of {name}", {}
    try:
        return action(state, inputs)
    except ActionFailed as err:
        return False, f"{name}: {err}", {}


class ActionFailed(Exception):
    pass


def checkout(state: JobState, inputs: dict):
    if any(state.workspace.iterdir()):
        raise ActionFailed("workspace is not empty")
    if inputs.get("persist-credentials", "true").lower() != "false":
        state.runner.annotations.append("checkout: credentials persisted in .git/config")
    subprocess.run(["git", "clone", "-q", "--no-tags", str(state.runner.origin), str(state.workspace)], check=True)
    _git(state.workspace, "checkout", "-q", "--detach", state.runner.sha)
    return True, f"checked out {state.runner.sha}", {}


def setup_python(state: JobState, inputs: dict):
    from readme_demo import layered_venv

    wanted = inputs.get("python-version", "")
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if wanted != have:
        raise ActionFailed(f"python-version {wanted!r}: the harness runs Python {have}")
    venv = state.folder / "python"
    layered_venv(venv)
    peers = Path(__file__).resolve().parents[2] / ".venv" / "peers"
    if peers.is_dir():
        # The runner has no index here, so the workflow's peer install step finds the peers .ci/setup.d already
        # made (its script skips an installed peer) instead of downloading them.
        (venv / "peers").symlink_to(peers)
    state.add_path(venv / "bin")
    return True, f"python {have} at {venv}", {"python-version": have}


def upload_artifact(state: JobState, inputs: dict):
    name, path = inputs.get("name", "artifact"), state.workspace / inputs["path"]
    dest = state.runner.artifacts / name
    if dest.exists():
        raise ActionFailed(f"an artifact named {name!r} was already uploaded in this run")
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else ([path] if path.is_file() else [])
    if not files:
        mode = inputs.get("if-no-files-found", "warn")
        message = f"No files were found with the provided path: {inputs['path']}. No artifacts will be uploaded."
        if mode == "error":
            raise ActionFailed(message)
        if mode == "warn":
            state.runner.annotations.append(f"::warning::{message}")
        return True, message, {}
    if path.is_dir():
        shutil.copytree(path, dest)
    else:
        dest.mkdir()
        shutil.copy2(path, dest / path.name)
    return True, f"uploaded {len(files)} files as {name}", {"artifact-id": name}


def download_artifact(state: JobState, inputs: dict):
    name = inputs["name"]
    source = state.runner.artifacts / name
    if not source.is_dir():
        raise ActionFailed(f"Unable to download artifact(s): Artifact not found for name: {name}")
    dest = state.workspace / inputs.get("path", ".")
    shutil.copytree(source, dest, dirs_exist_ok=True)
    return True, f"downloaded {name} to {dest}", {"download-path": str(dest)}


def upload_pages_artifact(state: JobState, inputs: dict):
    path = state.workspace / inputs.get("path", "_site/")
    if not path.is_dir() or not any(p.is_file() for p in path.rglob("*")):
        raise ActionFailed(f"{inputs.get('path')}: no folder with files to publish")
    dest = state.runner.artifacts / "github-pages"
    if dest.exists():
        raise ActionFailed("a github-pages artifact was already uploaded in this run")
    shutil.copytree(path, dest)
    return True, "pages artifact uploaded", {}


def deploy_pages(state: JobState, inputs: dict):
    source = state.runner.artifacts / "github-pages"
    if not source.is_dir():
        raise ActionFailed("no github-pages artifact to deploy")
    state.runner.pages = source
    owner, _, repo = state.runner.repository.partition("/")
    return True, "deployed", {"page_url": f"https://{owner}.github.io/{repo}/"}


def pypi_publish(state: JobState, inputs: dict):
    folder = state.workspace / inputs.get("packages-dir", "dist")
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    if not files:
        raise ActionFailed(f"{folder}: no distributions to upload")
    seen = set()
    for path in files:
        name, version = _metadata(path)
        if "+" in version:
            raise ActionFailed(f"{path.name}: version {version} has a local label, which PyPI refuses")
        normal = name.lower().replace("-", "_").replace(".", "_")
        if not path.name.lower().startswith(f"{normal}-{version}".lower()):
            raise ActionFailed(f"{path.name}: file name does not match its metadata ({name} {version})")
        if path.name in seen:
            raise ActionFailed(f"{path.name}: uploaded twice")
        seen.add(path.name)
    state.runner.pypi = [p.name for p in files]
    return True, f"dry run: {len(files)} files would be uploaded", {}


def _metadata(path: Path) -> tuple[str, str]:
    if path.name.endswith(".whl"):
        with zipfile.ZipFile(path) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            text = zf.read(meta).decode()
    elif path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tf:
            member = next(m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
            text = tf.extractfile(member).read().decode()
    else:
        raise ActionFailed(f"{path.name}: not a wheel or an sdist")
    headers = HeaderParser().parsestr(text)
    if not headers.get("Name") or not headers.get("Version"):
        raise ActionFailed(f"{path.name}: metadata without Name or Version")
    return headers["Name"], headers["Version"]


ACTIONS = {
    "actions/checkout": checkout,
    "actions/setup-python": setup_python,
    "actions/upload-artifact": upload_artifact,
    "actions/download-artifact": download_artifact,
    "actions/upload-pages-artifact": upload_pages_artifact,
    "actions/deploy-pages": deploy_pages,
    "pypa/gh-action-pypi-publish": pypi_publish,
}
