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
from urllib.parse import urlsplit

import github3
import requests
from dayone.core.errors import InputError
from dayone.core.redact import clean_token, server_text
from dayone.release import PublishError
from dayone.release.assets import LocalAsset, local_assets
from dayone.release.deadline import Deadline, DeadlineAdapter, DeadlinePassed
from github3 import exceptions as gh_errors
from github3.session import GitHubSession
from requests.adapters import Retry
from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, ReadTimeoutError

GHE_API_SUFFIX = "/api/v3"  # github3.GitHubEnterprise appends it to the instance URL itself
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0  # an upload's answer comes after the whole body is sent; the timeout is between reads
RETRIES = 3  # after the first try; with BACKOFF_S waits of 0, 1 and 2 s
BACKOFF_S = 0.5


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


def connect(token: str | None, api_url: str | None, deadline: Deadline | None = None) -> github3.GitHub:
    """A client for github.com, or for the GitHub Enterprise instance (or test server) at api_url. api_url may be the
    instance URL or its API root (".../api/v3"). Every request has a timeout between bytes and a total deadline
    (dayone.release.deadline); reads are retried on 5xx answers and connection resets with exponential backoff, a
    bounded number of times (a Retry-After header cannot stretch the wait); a timeout is not retried."""
    session = GitHubSession(default_connect_timeout=CONNECT_TIMEOUT_S, default_read_timeout=READ_TIMEOUT_S)
    adapter = DeadlineAdapter(deadline or Deadline(), max_retries=_retries())
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    if not api_url:
        return github3.GitHub(token=token or "", session=session)
    return github3.GitHubEnterprise(api_base(api_url), token=token or "", session=session)


def api_base(api_url: str) -> str:
    """The instance URL of --api-url; a URL that is not http(s)://host[:port][/path] is bad input."""
    try:
        parts = urlsplit(api_url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise InputError(f"--api-url {api_url!r}: expected an http(s) URL such as https://github.example.com")
    return api_url.rstrip("/").removesuffix(GHE_API_SUFFIX)


class _ResetsAndServerErrors(Retry):
    """urllib3's Retry, except that a timeout is not retried: a server that did not answer in READ_TIMEOUT_S is
    not asked again (each try would wait as long), while a reset connection or a 5xx answer is."""

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        if isinstance(error, ReadTimeoutError | ConnectTimeoutError):
            raise MaxRetryError(_pool, url, error) from error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _retries() -> Retry:
    return _ResetsAndServerErrors(
        total=RETRIES,
        connect=RETRIES,
        read=RETRIES,
        status=RETRIES,
        backoff_factor=BACKOFF_S,
        backoff_max=8 * BACKOFF_S,
        status_forcelist=(500, 502, 503, 504),
        allowed_methods=frozenset({"GET", "HEAD"}),  # a create or an upload is not repeated blindly
        respect_retry_after_header=False,
        raise_on_status=False,  # the last 5xx answer reaches github3, which names its status
    )


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
    token = clean_token(token, "GITHUB_TOKEN")  # before any request: a line end in it made requests quote it
    files = local_assets(dist)
    owner, name = repo_slug.split("/", 1)
    result = PublishResult(repo=repo_slug, tag=tag, dry_run=dry_run)
    deadline = Deadline()
    gh = connect(token, api_url, deadline)
    with _api_errors(repo_slug, tag):
        repo = gh.repository(owner, name)
        release = _release_for_tag(repo, tag)
        remote = {} if release is None else {a.name: a for a in release.assets()}
        result.assets = [_classify(f, remote.get(f.name), deadline) for f in files]
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


def _classify(local: LocalAsset, remote, deadline: Deadline) -> AssetAction:
    row = AssetAction(local.name, local.size, local.sha256, "upload")
    if remote is None or remote.as_dict().get("state", "uploaded") != "uploaded":
        return row
    digest = remote.as_dict().get("digest") or ""
    if digest.startswith("sha256:"):
        row.remote_sha256, row.checked_by = digest.removeprefix("sha256:"), "digest"
    else:
        row.remote_sha256, row.checked_by = _download_sha256(remote, deadline), "download"
    row.action = "skip" if row.remote_sha256 == local.sha256 else "conflict"
    return row


class _HashingSink:
    """A write-only file object for github3's Asset.download: hashes the stream instead of storing it. download()
    returns the sink's `name` on success and None when the asset is gone, hence the attribute."""

    def __init__(self, name: str, deadline: Deadline) -> None:
        self.name = name
        self.digest = hashlib.sha256()
        self.deadline = deadline

    def write(self, chunk: bytes) -> int:
        self.deadline.check()  # a streamed download is outside the per-request deadline: the publish's bounds it
        self.digest.update(chunk)
        return len(chunk)


def _download_sha256(asset, deadline: Deadline) -> str:
    sink = _HashingSink(asset.name, deadline)
    if asset.download(sink) is None:
        raise PublishError(f"asset {asset.name}: listed on the release but could not be downloaded to compare")
    return sink.digest.hexdigest()


@contextlib.contextmanager
def _api_errors(repo_slug: str, tag: str) -> Iterator[None]:
    """One line per failure, exit 1 for the remote side and 2 for our input. Text the server sent is quoted only
    through `server_text` (redacted, one line, bounded): an API that echoes request headers would show the token."""
    where = f"release {tag} of {repo_slug}"
    try:
        yield
    except gh_errors.NotFoundError as err:
        raise InputError(f"--repo {repo_slug}: not found, or the token cannot see it ({err.code})") from None
    except gh_errors.AuthenticationFailed as err:
        raise InputError(f"GITHUB_TOKEN: rejected by the API ({err.code} {server_text(err.msg)})") from None
    except gh_errors.ForbiddenError as err:
        raise PublishError(
            f"{where}: forbidden ({err.code}): the token lacks permission to write releases of {repo_slug}, or a "
            f"rate limit was hit: {server_text(err.msg)}"
        ) from None
    except (gh_errors.UnexpectedResponse, gh_errors.UnprocessableResponseBody, gh_errors.IncompleteResponse):
        raise PublishError(f"{where}: the API answered with something that is not GitHub's JSON") from None
    except gh_errors.GitHubError as err:
        raise PublishError(f"{where}: GitHub API error {err.code}: {server_text(err.msg)}") from None
    except gh_errors.ConnectionError as err:
        raise PublishError(f"{where}: {_connection_failure(err.exception)}") from None
    except gh_errors.TransportError as err:
        raise InputError(f"--api-url: cannot make a request ({type(err.exception).__name__})") from None
    except requests.RequestException as err:  # raised outside github3's wrapper (an asset download)
        raise PublishError(f"{where}: {_connection_failure(err)}") from None
    except (KeyError, TypeError, AttributeError):  # a JSON answer of the wrong shape, met deeper in github3
        raise PublishError(f"{where}: the API answered with JSON of an unexpected shape") from None


def _connection_failure(err: BaseException) -> str:
    """What went wrong on the way to the API, in words; requests' own text (URLs, addresses) is left out."""
    tries = f"after {RETRIES + 1} tries"
    if isinstance(err, DeadlinePassed):
        return f"{err.what} ran past its {err.seconds:g} s deadline (the API answered too slowly)"
    if isinstance(err, requests.exceptions.SSLError):
        return "TLS handshake with the API failed (certificate or protocol)"
    cause = repr(err)  # requests keeps urllib3's reason (a timeout, a DNS failure) only in the text
    if isinstance(err, requests.exceptions.Timeout) or "TimeoutError" in cause:
        return f"the API did not answer within {READ_TIMEOUT_S:g} s"
    if "NameResolution" in cause or "Name or service not known" in cause:
        return f"cannot resolve the API's host name ({tries})"
    if isinstance(err, requests.exceptions.RetryError):
        return f"the API kept failing ({tries})"
    return f"cannot connect to the API ({tries})"
