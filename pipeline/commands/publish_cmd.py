"""`integrate publish DIST --repo OWNER/NAME --tag TAG`: DIST's files as GitHub release assets, idempotently; optionally a
folder to the Hugging Face Hub. Tokens come from the environment only (GITHUB_TOKEN, HF_TOKEN) and are never printed."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click
from dayone.core.errors import InputError
from dayone.present import console, emit_json, error_document, human_bytes, plain, shown
from dayone.release import PublishError
from dayone.release.github import PublishResult
from dayone.release.github import publish as publish_release
from dayone.release.hub import HubResult, upload_to_hub
from dayone.reports.files import write_report
from dayone.reports.model import Report, now
from rich.table import Table

REPO_SLUG = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@click.command()
@click.argument("dist", type=click.Path(path_type=Path))
@click.option("--repo", required=True, help="GitHub repository OWNER/NAME.")
@click.option("--tag", required=True, help="Release tag (the release is created when missing).")
@click.option("--api-url", help="GitHub Enterprise URL (or its /api/v3 root); default github.com.")
@click.option("--dry-run", is_flag=True, help="Only read: show what would be created and uploaded.")
@click.option("--hf-repo", help="Also upload --hf-folder to this Hugging Face model repo (token: HF_TOKEN).")
@click.option("--hf-folder", type=click.Path(path_type=Path), help="Folder with a README.md model card.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a publish stage report (JSON) here; needs --spec.",
)
@click.option("--spec", "spec_name", help="Spec name recorded in the --report.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def publish(
    dist: Path,
    repo: str,
    tag: str,
    api_url: str | None,
    dry_run: bool,
    hf_repo: str | None,
    hf_folder: Path | None,
    report_path: Path | None,
    spec_name: str | None,
    as_json: bool,
) -> None:
    """Publish the files in DIST as assets of the GitHub release TAG.

    An asset already on the release with the same SHA-256 is skipped, so a second run changes nothing; one with
    other bytes stops the run before any upload (exit 1, naming it).
    """
    if not REPO_SLUG.match(repo):
        raise InputError(f"--repo {repo!r}: expected OWNER/NAME")
    if report_path is not None and not spec_name:
        raise InputError("--report: needs --spec NAME to say which model the report is for")
    if (hf_repo is None) != (hf_folder is None):
        raise InputError("--hf-repo and --hf-folder go together")
    token = os.environ.get("GITHUB_TOKEN") or None
    if token is None and not dry_run:
        raise InputError("GITHUB_TOKEN is not set (publish reads the token from the environment only)")

    def log(line: str) -> None:
        click.echo(line, err=True)

    try:
        result = publish_release(dist, repo, tag, token=token, api_url=api_url, dry_run=dry_run, log=log)
        hub = None
        if hf_repo is not None and not result.conflicts:
            hub = upload_to_hub(
                hf_folder, hf_repo, token=os.environ.get("HF_TOKEN") or None, dry_run=dry_run, message=f"dayone {tag}"
            )
    except PublishError as err:
        _write_report(report_path, spec_name, dry_run, "fail", {"error": str(err)})
        click.echo(f"error: {plain(err)}", err=True)
        if as_json:  # one document on stdout, failure too
            emit_json(error_document(plain(err), PublishError.exit_code))
        sys.exit(PublishError.exit_code)

    details = {"github": result.as_dict(), "hub": None if hub is None else hub.as_dict()}
    _write_report(report_path, spec_name, dry_run, "fail" if result.conflicts else "pass", details)
    if as_json:
        emit_json(details)
    else:
        _print(result, hub)
    if result.conflicts:
        names = ", ".join(
            f"{a.name} (release has sha256 {a.remote_sha256[:12]}..., DIST has {a.sha256[:12]}...)"
            for a in result.conflicts
        )
        click.echo(f"error: release {tag} already has different bytes for: {names}; nothing was uploaded", err=True)
        sys.exit(PublishError.exit_code)


def _write_report(path: Path | None, spec_name: str | None, dry_run: bool, status: str, details: dict) -> None:
    # A dry run publishes nothing, so it leaves no publish report behind to be mistaken for a release.
    if path is not None and not dry_run:
        write_report(path, Report(stage="publish", spec=spec_name, status=status, created=now(), details=details))


def _print(result: PublishResult, hub: HubResult | None) -> None:
    would = "would be " if result.dry_run else ""
    state = f"{would}created" if result.release_created else "exists"
    console.print(
        f"[bold]{shown(result.repo)}[/] release {shown(result.tag)}: {state}"
        + (f" ({shown(result.release_url)})" if result.release_url else "")
    )
    table = Table("asset", "size", "sha256", "action")
    for a in result.assets:
        action = {"upload": f"{would}uploaded", "skip": "already there", "conflict": "[red]DIFFERENT[/]"}[a.action]
        table.add_row(shown(a.name), human_bytes(a.size), a.sha256[:16], action)
    console.print(table)
    if hub is not None:
        console.print(
            f"[bold]{shown(hub.repo_id)}[/] (Hugging Face Hub): {len(hub.files)} files from {shown(hub.folder)} "
            + ("would be uploaded" if hub.dry_run else f"uploaded ({shown(hub.commit_url)})")
        )
        for f in hub.files:
            console.print(f"  {shown(f['path'])} ({human_bytes(f['size'])})")


COMMAND = publish
