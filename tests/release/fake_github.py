"""A small GitHub REST server on 127.0.0.1 speaking the endpoints github3.py uses to publish a release, recording every
request. It lives under /api/v3 like GitHub Enterprise, so `--api-url http://127.0.0.1:PORT` reaches it through
github3.GitHubEnterprise exactly as a real instance would.

Endpoints (found by running `integrate publish` against it):
    GET    /api/v3/repos/{owner}/{name}
    GET    /api/v3/repos/{owner}/{name}/releases/tags/{tag}        404 until the release exists
    POST   /api/v3/repos/{owner}/{name}/releases
    GET    /api/v3/repos/{owner}/{name}/releases/{id}/assets
    POST   /uploads/repos/{owner}/{name}/releases/{id}/assets?name=  (the release's upload_url points here)
    GET    /api/v3/repos/{owner}/{name}/releases/assets/{id}        (download, Accept: application/octet-stream)
    DELETE /api/v3/repos/{owner}/{name}/releases/assets/{id}
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from local_server import LocalServer

USER_KEYS = (
    "avatar_url",
    "events_url",
    "followers_url",
    "following_url",
    "gists_url",
    "html_url",
    "organizations_url",
    "received_events_url",
    "repos_url",
    "starred_url",
    "subscriptions_url",
    "url",
)
REPO_URL_KEYS = (
    "archive_url",
    "assignees_url",
    "blobs_url",
    "branches_url",
    "collaborators_url",
    "comments_url",
    "commits_url",
    "compare_url",
    "contents_url",
    "contributors_url",
    "deployments_url",
    "downloads_url",
    "events_url",
    "forks_url",
    "git_commits_url",
    "git_refs_url",
    "git_tags_url",
    "hooks_url",
    "issue_comment_url",
    "issue_events_url",
    "issues_url",
    "keys_url",
    "labels_url",
    "languages_url",
    "merges_url",
    "milestones_url",
    "notifications_url",
    "pulls_url",
    "releases_url",
    "stargazers_url",
    "statuses_url",
    "subscribers_url",
    "subscription_url",
    "tags_url",
    "teams_url",
    "trees_url",
    "clone_url",
    "git_url",
    "ssh_url",
    "svn_url",
    "html_url",
    "url",
)
STAMP = "2026-01-01T00:00:00Z"
REPO_COUNT_KEYS = (
    "forks_count",
    "network_count",
    "open_issues_count",
    "stargazers_count",
    "subscribers_count",
    "watchers_count",
)


@dataclass
class Recorded:
    method: str
    path: str  # with the query string
    headers: dict[str, str]
    body: bytes


@dataclass
class State:
    owner: str
    name: str
    with_digest: bool = True  # False: act like an older GitHub Enterprise without asset digests
    releases: dict[str, dict] = field(default_factory=dict)  # tag -> release json
    assets: dict[int, list[dict]] = field(default_factory=dict)  # release id -> asset jsons
    blobs: dict[int, bytes] = field(default_factory=dict)  # asset id -> bytes
    requests: list[Recorded] = field(default_factory=list)
    next_id: int = 1


class FakeGitHub(LocalServer):
    def __init__(self, owner: str = "acme", name: str = "kimi", with_digest: bool = True) -> None:
        self.state = State(owner, name, with_digest)
        self.lock = threading.Lock()
        super().__init__(self._handler())

    @property
    def requests(self) -> list[Recorded]:
        return list(self.state.requests)

    def writes(self) -> list[Recorded]:
        return [r for r in self.state.requests if r.method != "GET"]

    # JSON documents ------------------------------------------------------------------------------------------------
    def _user(self) -> dict:
        return {
            "login": self.state.owner,
            "id": 1,
            "type": "User",
            "gravatar_id": "",
            **{k: f"{self.url}/api/v3/users/{self.state.owner}" for k in USER_KEYS},
        }

    def _repo(self) -> dict:
        s = self.state
        api = f"{self.url}/api/v3/repos/{s.owner}/{s.name}"
        doc = {k: api for k in REPO_URL_KEYS}
        doc.update(
            id=7,
            name=s.name,
            full_name=f"{s.owner}/{s.name}",
            owner=self._user(),
            description="",
            default_branch="main",
            homepage="",
            language="Python",
            mirror_url=None,
            size=1,
            releases_url=f"{api}/releases{{/id}}",
        )
        doc |= dict.fromkeys(("created_at", "updated_at", "pushed_at"), STAMP)
        doc |= dict.fromkeys(("private", "fork", "archived", "has_pages", "has_projects", "has_wiki"), False)
        doc |= dict.fromkeys(("has_downloads", "has_issues"), True)
        doc |= dict.fromkeys(REPO_COUNT_KEYS, 0)
        return doc

    def _release(self, tag: str, rid: int) -> dict:
        s = self.state
        api = f"{self.url}/api/v3/repos/{s.owner}/{s.name}/releases/{rid}"
        return {
            "id": rid,
            "tag_name": tag,
            "name": tag,
            "body": "",
            "draft": False,
            "prerelease": False,
            "target_commitish": "main",
            "created_at": STAMP,
            "published_at": STAMP,
            "author": self._user(),
            "assets": [],
            "url": api,
            "assets_url": f"{api}/assets",
            "html_url": f"{self.url}/{s.owner}/{s.name}/releases/tag/{tag}",
            "upload_url": f"{self.url}/uploads/repos/{s.owner}/{s.name}/releases/{rid}/assets{{?name,label}}",
            "tarball_url": f"{api}/tarball",
            "zipball_url": f"{api}/zipball",
        }

    def _asset(self, aid: int, name: str, data: bytes, content_type: str) -> dict:
        s = self.state
        doc = {
            "id": aid,
            "name": name,
            "label": None,
            "content_type": content_type,
            "size": len(data),
            "state": "uploaded",
            "download_count": 0,
            "created_at": STAMP,
            "updated_at": STAMP,
            "url": f"{self.url}/api/v3/repos/{s.owner}/{s.name}/releases/assets/{aid}",
            "browser_download_url": f"{self.url}/{s.owner}/{s.name}/releases/download/{name}",
        }
        if s.with_digest:
            doc["digest"] = "sha256:" + hashlib.sha256(data).hexdigest()
        return doc

    # Routing -------------------------------------------------------------------------------------------------------
    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with fake.lock:
                    fake.state.requests.append(Recorded(method, self.path, dict(self.headers), body))
                    status, payload, ctype = fake._route(method, self.path, self.headers, body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        return Handler

    def _route(self, method: str, raw_path: str, headers, body: bytes):
        s = self.state
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        repo = f"/repos/{s.owner}/{s.name}"
        not_found = (404, {"message": "Not Found"}, "application/json")
        if method == "GET" and path == f"/api/v3{repo}":
            return 200, self._repo(), "application/json"
        if m := re.fullmatch(rf"/api/v3{repo}/releases/tags/(.+)", path):
            rel = s.releases.get(m[1])
            return (200, rel, "application/json") if rel else not_found
        if method == "POST" and path == f"/api/v3{repo}/releases":
            tag = json.loads(body)["tag_name"]
            rid, s.next_id = s.next_id, s.next_id + 1
            s.releases[tag] = self._release(tag, rid)
            s.assets[rid] = []
            return 201, s.releases[tag], "application/json"
        if m := re.fullmatch(rf"/api/v3{repo}/releases/(\d+)/assets", path):
            return 200, s.assets.get(int(m[1]), []), "application/json"
        if method == "POST" and (m := re.fullmatch(rf"/uploads{repo}/releases/(\d+)/assets", path)):
            rid, name = int(m[1]), query["name"][0]
            if any(a["name"] == name for a in s.assets[rid]):
                return 422, {"message": "Validation Failed", "errors": [{"code": "already_exists"}]}, "application/json"
            aid, s.next_id = s.next_id, s.next_id + 1
            s.blobs[aid] = body
            asset = self._asset(aid, name, body, headers.get("Content-Type", ""))
            s.assets[rid].append(asset)
            return 201, asset, "application/json"
        if m := re.fullmatch(rf"/api/v3{repo}/releases/assets/(\d+)", path):
            aid = int(m[1])
            if aid not in s.blobs:
                return not_found
            if method == "DELETE":
                del s.blobs[aid]
                for assets in s.assets.values():
                    assets[:] = [a for a in assets if a["id"] != aid]
                return 204, b"", "application/json"
            return 200, s.blobs[aid], "application/octet-stream"
        return not_found
