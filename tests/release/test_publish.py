"""`integrate publish` against a local fake GitHub: first run creates and uploads, second changes nothing, changed bytes
stop the run naming the asset, and the token never shows up anywhere we print or write."""

from __future__ import annotations

import json
import socket

import pytest
from cli_runner import assert_bad_input, integrate
from dayone.release.hub import upload_to_hub
from fake_github import FakeGitHub

# Distinctive so that a leak anywhere is found by a plain substring search.
TOKEN = "ghp_DAYONEtest_7f3a9c_never_print_me"
HF_TOKEN = "hf_DAYONEtest_41b7_never_print_me"
FILES = {
    "dayone_kimi_k3-0.1.0-py3-none-any.whl": b"PK wheel bytes",
    "SHA256SUMS": b"abc  x.whl\n",
    "coverage.json": b'{"ok": true}',
}


@pytest.fixture
def dist(tmp_path):
    folder = tmp_path / "dist"
    folder.mkdir()
    for name, data in FILES.items():
        (folder / name).write_bytes(data)
    (folder / ".partial.tmp").write_bytes(b"hidden files are not release assets")
    return folder


@pytest.fixture(params=[True, False], ids=["digest", "download"])
def github(request):
    """The fake server, once returning asset digests (github.com today) and once without (older Enterprise)."""
    with FakeGitHub("acme", "kimi", with_digest=request.param) as server:
        yield server


def publish(dist, server, *extra, token=TOKEN):
    return integrate(
        "publish",
        dist,
        "--repo",
        "acme/kimi",
        "--tag",
        "v0.1.0",
        "--api-url",
        server.url,
        *extra,
        env={"GITHUB_TOKEN": token or "", "HF_TOKEN": HF_TOKEN},
    )


def assert_no_token(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text and HF_TOKEN not in text


def test_first_run_creates_and_uploads_second_changes_nothing(dist, github, tmp_path):
    report = tmp_path / "publish.json"
    first = publish(dist, github, "--json", "--report", report, "--spec", "kimi-k3")
    assert first.code == 0, first.err
    writes = github.writes()
    assert [(w.method, w.path.split("?")[0]) for w in writes] == [
        ("POST", "/api/v3/repos/acme/kimi/releases"),
        *[("POST", "/uploads/repos/acme/kimi/releases/1/assets")] * len(FILES),
    ]
    assert json.loads(writes[0].body)["tag_name"] == "v0.1.0"
    uploaded = {w.path.split("name=")[1]: w.body for w in writes[1:]}
    assert uploaded == FILES  # every file, byte for byte, and not the hidden one
    assert all(w.headers["Authorization"] == f"token {TOKEN}" for w in writes)
    doc = json.loads(first.out)
    assert doc["github"]["release_created"] and {a["action"] for a in doc["github"]["assets"]} == {"upload"}

    before = len(github.requests)
    second = publish(dist, github, "--json", "--report", report, "--spec", "kimi-k3")
    assert second.code == 0, second.err
    assert github.writes() == writes  # nothing new was written
    assert all(r.method == "GET" for r in github.requests[before:])
    doc = json.loads(second.out)
    assert not doc["github"]["release_created"]
    assert {a["action"] for a in doc["github"]["assets"]} == {"skip"}
    expected_check = "digest" if github.state.with_digest else "download"
    assert {a["checked_by"] for a in doc["github"]["assets"]} == {expected_check}

    saved = json.loads(report.read_text())
    assert saved["stage"] == "publish" and saved["status"] == "pass" and saved["spec"] == "kimi-k3"
    assert_no_token(first.out, first.err, second.out, second.err, report.read_text())


def test_changed_file_fails_naming_the_asset_and_uploads_nothing(dist, github, tmp_path):
    assert publish(dist, github).code == 0
    (dist / "coverage.json").write_bytes(b'{"ok": false}')
    (dist / "late.txt").write_bytes(b"new file, but the run stops before any upload")
    writes = list(github.writes())
    report = tmp_path / "publish.json"
    result = publish(dist, github, "--report", report, "--spec", "kimi-k3")
    assert result.code == 1
    error = result.err.split("error:")[1]
    assert "coverage.json" in error and "SHA256SUMS" not in error
    assert github.writes() == writes
    assert json.loads(report.read_text())["status"] == "fail"
    assert_no_token(result.out, result.err, report.read_text())


def test_missing_token_is_bad_input(dist, github):
    assert_bad_input(publish(dist, github, token=None), "GITHUB_TOKEN")
    assert github.requests == []


def test_dry_run_only_reads_and_needs_no_token(dist, github):
    result = publish(dist, github, "--dry-run", "--json", token=None)
    assert result.code == 0, result.err
    assert github.requests and github.writes() == []
    doc = json.loads(result.out)["github"]
    assert doc["dry_run"] and doc["release_created"]
    assert [a["name"] for a in doc["assets"]] == sorted(FILES)


@pytest.mark.parametrize(
    "args,fragment",
    [
        (("--repo", "not-a-slug"), "--repo"),
        (("--repo", "acme/kimi", "--report", "r.json"), "--spec"),
        (("--repo", "acme/kimi", "--hf-repo", "acme/kimi-k3"), "--hf-folder"),
    ],
)
def test_bad_options_are_one_line(dist, args, fragment):
    assert_bad_input(integrate("publish", dist, "--tag", "v1", "--dry-run", *args), fragment)


def test_missing_dist_is_bad_input(tmp_path):
    assert_bad_input(integrate("publish", tmp_path / "nope", "--repo", "a/b", "--tag", "v1", "--dry-run"), "nope")


def test_hub_dry_run_lists_the_folder(dist, github, tmp_path):
    card = tmp_path / "card"
    (card / "configs").mkdir(parents=True)
    (card / "README.md").write_text("---\nlicense: other\n---\n# Kimi K3 (dayone adapters)\n")
    (card / "configs" / "sglang.json").write_text("{}")
    result = publish(dist, github, "--dry-run", "--json", "--hf-repo", "acme/kimi-k3", "--hf-folder", card)
    assert result.code == 0, result.err
    hub = json.loads(result.out)["hub"]
    assert hub["dry_run"] and hub["repo_id"] == "acme/kimi-k3"
    assert [f["path"] for f in hub["files"]] == ["README.md", "configs/sglang.json"]
    assert_no_token(result.out, result.err)


def test_hub_dry_run_touches_no_network(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("# card\n")

    def refuse(*args, **kwargs):
        raise AssertionError("the Hub dry run opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    result = upload_to_hub(tmp_path, "acme/kimi-k3", token=HF_TOKEN, dry_run=True, message="m")
    assert [f["path"] for f in result.files] == ["README.md"]
    assert HF_TOKEN not in json.dumps(result.as_dict())


def test_hub_folder_needs_a_model_card(dist, github, tmp_path):
    result = publish(dist, github, "--dry-run", "--hf-repo", "acme/kimi-k3", "--hf-folder", tmp_path)
    assert_bad_input(result, "README.md")
