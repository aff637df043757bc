"""Publish the files of DIST as the assets of a GitHub release, so that running it again changes nothing.

How an asset already on the release is compared: by SHA-256. GitHub returns `"digest": "sha256:<hex>"` for each
release asset; when an API does not (an older GitHub Enterprise Server), the asset is downloaded and hashed. We keep
no SHA256SUMS side file on the release for this: it would be one more asset to keep in step with the others, and a
run killed between an upload and the SUMS update would leave them disagreeing. (The package stage's own SHA256SUMS
in DIST is uploaded like any other file.)

Nothing is uploaded unless every asset is either new or identical: one asset with other bytes stops the run before
the first write, naming the asset.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import github3
import requests
from dayone.errors import InputError
from dayone.release import PublishError
from dayone.release.assets import LocalAsset, local_assets
from github3 import exceptions as gh_errors

GHE_API_SUFFIX = "/api/v3"  # github3.GitHubEnterprise appends it to the instance URL itself


@dataclass
class AssetAction:
    name: str
    size: int
    sha256: str
    action: str  # "upload", "skip" (same bytes already there) or "conflict" (other bytes there)
    remote_sha256: str | None = None
    checked_by: str | None = None  # "digest" (the API's) or "download" (hashed here)


@dataclass
class PublishResult:
    repo: str
    tag: str
    dry_run: bool
    release_url: str | None = None
    release_created: bool = False  # in a dry run: the release would be created
    assets: list[AssetAction] = field(default_factory=list)

    @property
    def conflicts(self) -> list[AssetAction]:
        return [a for a in self.assets if a.action == "conflict"]

    def as_dict(self) -> dict:
        return asdict(self)


def connect(token: str | None, api_url: str | None) -> github3.GitHub:
    """A client for github.com, or for the GitHub Enterprise instance (or test server) at api_url. api_url may be the
    instance URL or its API root (".../api/v3")."""
    if not api_url:
        return github3.GitHub(token=token or "")
    base = api_url.rstrip("/")
    base = base.removesuffix(GHE_API_SUFFIX)
    return github3.GitHubEnterprise(base, token=token or "")


def publish(
    dist: Path,
    repo_slug: str,
    tag: str,
    *,
    token: str | None,
    api_url: str | None = None,
    dry_run: bool = False,
    log: Callable[[str], None] = lambda line: None,
) -> PublishResult:
    """Create the release for `tag` (or reuse it) and upload each file of dist not already there.

    In a dry run only reads are made (the token is used when given, for private repositories)."""
    files = local_assets(dist)
    owner, name = repo_slug.split("/", 1)
    result = PublishResult(repo=repo_slug, tag=tag, dry_run=dry_run)
    gh = connect(token, api_url)
    with _api_errors(repo_slug, tag):
        repo = gh.repository(owner, name)
        release = _release_for_tag(repo, tag)
        remote = {} if release is None else {a.name: a for a in release.assets()}
        result.assets = [_classify(f, remote.get(f.name)) for f in files]
        result.release_created = release is None
        result.release_url = None if release is None else release.html_url
        if result.conflicts or dry_run:
            return result
        if release is None:
            release = repo.create_release(tag, name=tag)
            result.release_url = release.html_url
            log(f"created release {tag}")
        for f, planned in zip(files, result.assets):
            if planned.action != "upload":
                continue
            broken = remote.get(f.name)
            if broken is not None:
                broken.delete()  # an upload killed half way leaves a "starter" asset that blocks the name
            with open(f.path, "rb") as data:
                release.upload_asset(f.content_type, f.name, data)
            log(f"uploaded {f.name}")
    return result


def _release_for_tag(repo, tag: str):
    try:
        return repo.release_from_tag(tag)
    except gh_errors.NotFoundError:
        return None


def _classify(local: LocalAsset, remote) -> AssetAction:
    row = AssetAction(local.name, local.size, local.sha256, "upload")
    if remote is None or remote.as_dict().get("state", "uploaded") != "uploaded":
        return row
    digest = remote.as_dict().get("digest") or ""
    if digest.startswith("sha256:"):
        row.remote_sha256, row.checked_by = digest.removeprefix("sha256:"), "digest"
    else:
        row.remote_sha256, row.checked_by = _download_sha256(remote), "download"
    row.action = "skip" if row.remote_sha256 == local.sha256 else "conflict"
    return row


class _HashingSink:
    """A write-only file object for github3's Asset.download: hashes the stream instead of storing it. download()
    returns the sink's `name` on success and None when the asset is gone, hence the attribute."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.digest = hashlib.sha256()

    def write(self, chunk: bytes) -> int:
        self.digest.update(chunk)
        return len(chunk)


def _download_sha256(asset) -> str:
    sink = _HashingSink(asset.name)
    if asset.download(sink) is None:
        raise PublishError(f"asset {asset.name}: listed on the release but could not be downloaded to compare")
    return sink.digest.hexdigest()


@contextlib.contextmanager
def _api_errors(repo_slug: str, tag: str) -> Iterator[None]:
    """One line per failure. Messages are built from status codes and GitHub's own message, never from the request,
    so the token cannot leak into them."""
    try:
        yield
    except gh_errors.NotFoundError as err:
        raise InputError(f"--repo {repo_slug}: not found, or the token cannot see it ({err.code})") from None
    except gh_errors.AuthenticationFailed as err:
        raise InputError(f"GITHUB_TOKEN: rejected by the API ({err.code} {err.msg})") from None
    except gh_errors.GitHubError as err:
        raise PublishError(f"release {tag} of {repo_slug}: GitHub API error {err.code}: {err.msg}") from None
    except requests.RequestException as err:
        raise PublishError(f"release {tag} of {repo_slug}: cannot reach the API ({type(err).__name__})") from None
