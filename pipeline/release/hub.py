"""Upload a folder (a model card README.md plus whatever ships beside it) to a Hugging Face Hub model repository.

The dry run lists what would be uploaded from the local folder alone and never imports huggingface_hub's network
code, so tests and offline runs touch nothing. A real run is one `upload_folder` commit; the Hub skips files whose
content it already has, so a second run makes no new commit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from dayone.core.errors import InputError
from dayone.core.redact import clean_token
from dayone.release import PublishError

MODEL_CARD = "README.md"
# What the Hub's refusals mean for an upload, said as such rather than as a failure to reach it.
_MEANING = {
    401: ": HF_TOKEN was not accepted",
    403: ": HF_TOKEN may not write to this repo",
    404: ": no such repo, or HF_TOKEN cannot see it",
}


@dataclass
class HubResult:
    repo_id: str
    folder: str
    dry_run: bool
    files: list[dict] = field(default_factory=list)  # {"path": path in the repo, "size": bytes}
    commit_url: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def hub_files(folder: Path) -> list[dict]:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"--hf-folder {folder}: not a folder")
    if not (folder / MODEL_CARD).is_file():
        raise InputError(f"--hf-folder {folder}: no {MODEL_CARD} model card")
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and not any(s.startswith(".") for s in p.relative_to(folder).parts)
    )
    return [{"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size} for p in files]


def upload_to_hub(folder: Path, repo_id: str, *, token: str | None, dry_run: bool, message: str) -> HubResult:
    result = HubResult(repo_id=repo_id, folder=str(folder), dry_run=dry_run, files=hub_files(folder))
    if dry_run:
        return result
    token = clean_token(token, "HF_TOKEN")
    if not token:
        raise InputError("--hf-repo: HF_TOKEN is not set (use --dry-run to see what would be uploaded)")
    import httpx2
    from huggingface_hub import HfApi  # imported here: the dry run must not need (or touch) the Hub
    from huggingface_hub.errors import HfHubHTTPError

    # Messages name the status or the kind of failure, never the server's text: it may echo the request's headers.
    try:
        info = HfApi(token=token).upload_folder(repo_id=repo_id, folder_path=str(folder), commit_message=message)
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        raise PublishError(
            f"--hf-repo {repo_id}: the Hub refused the upload (HTTP {status}{_MEANING.get(status, '')})"
        ) from None
    except httpx2.TimeoutException:
        raise PublishError(f"--hf-repo {repo_id}: the Hub did not answer in time") from None
    except (httpx2.HTTPError, OSError) as err:
        raise PublishError(f"--hf-repo {repo_id}: cannot reach the Hub ({type(err).__name__})") from None
    except (ValueError, KeyError, TypeError):  # a 200 whose body is not the JSON the Hub sends
        raise PublishError(f"--hf-repo {repo_id}: the Hub answered with something that is not its JSON") from None
    result.commit_url = getattr(info, "commit_url", None) or str(info)
    return result
