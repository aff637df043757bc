"""Resolve what the user names (a folder, or an HF Hub repo id with optional @revision) into an open Checkpoint.

For a Hub repo only config.json, the index and the shard headers are fetched, never the tensor data: shards already
in the local HF cache are read there; missing headers come from HTTP range requests (huggingface_hub's
get_safetensors_metadata). HF_HUB_CACHE / HF_HOME and HF_HUB_OFFLINE are honoured by huggingface_hub itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from dayone.checkpoint.names import check_names
from dayone.checkpoint.reader import INDEX_NAME, MAX_INDEX_BYTES, SINGLE_NAME, Checkpoint, open_local
from dayone.core.errors import InputError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+(@[\w.\-/]+)?$")


def open_checkpoint(source: str | Path, allow_pickle: bool = False, read_headers: bool = True) -> Checkpoint:
    path = Path(source)
    if path.exists():
        return open_local(path, allow_pickle=allow_pickle, source=str(source), read_headers=read_headers)
    text = str(source)
    if REPO_ID.match(text):
        repo_id, _, revision = text.partition("@")
        return open_hub(repo_id, revision or None, allow_pickle, read_headers)
    raise InputError(f"{source}: no such folder, and not an HF repo id (owner/name[@revision])")


_REFUSAL = {401: " (HF_TOKEN not accepted)", 403: " (gated or private: no access with this token)", 404: " (not found)"}


def open_hub(repo_id: str, revision: str | None, allow_pickle: bool = False, read_headers: bool = True) -> Checkpoint:
    """A Hub checkpoint through the local HF cache: metadata files are downloaded into it (or found there offline)."""
    import logging

    import httpx2
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    source = f"{repo_id}@{revision}" if revision else repo_id
    # huggingface_hub logs each retry of an unreachable Hub as a warning ("Retrying in 8s"): its retries are bounded
    # (5, ~23 s); the failure, if any, is our one line.
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    try:
        config_path = Path(hf_hub_download(repo_id, "config.json", revision=revision))
    except (RepositoryNotFoundError, RevisionNotFoundError) as err:
        raise InputError(f"{source}: {type(err).__name__.replace('Error', '')}: not found on the Hub") from None
    except LocalEntryNotFoundError as err:
        # huggingface_hub raises this for any failed lookup not in the cache; a refusal (403 gated, 404) is its
        # cause, and is said as what it is rather than as "offline?".
        cause = err.__cause__
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if isinstance(cause, HfHubHTTPError) and status is not None:
            raise InputError(
                f"{source}: the Hub answered HTTP {status} for config.json{_REFUSAL.get(status, '')}"
            ) from None
        raise InputError(
            f"{source}: config.json is not in the HF cache and the Hub cannot be reached (offline?)"
        ) from None
    except EntryNotFoundError:
        raise InputError(f"{source}: the repo has no config.json") from None
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        raise InputError(f"{source}: the Hub answered HTTP {status} for config.json") from None
    except (httpx2.HTTPError, OSError) as err:
        raise InputError(f"{source}: cannot reach the Hub ({type(err).__name__})") from None
    except (AttributeError, KeyError, TypeError, ValueError) as err:  # huggingface_hub choking on what it was sent
        raise InputError(f"{source}: the Hub's answer could not be read ({type(err).__name__})") from None
    snapshot = config_path.parent
    # The cache's snapshot files are symlinks into ../../blobs: trust the repo's cache folder, nothing outside it.
    repo_cache = snapshot.parent.parent
    for name in (INDEX_NAME, SINGLE_NAME):
        try:
            hf_hub_download(repo_id, name, revision=revision)
            break
        except (EntryNotFoundError, LocalEntryNotFoundError, HfHubHTTPError, httpx2.HTTPError, OSError):
            continue  # not there, or not reachable: the check below names what is missing
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise InputError(f"{source}: the Hub's answer could not be read ({type(err).__name__})") from None
    if not (snapshot / INDEX_NAME).exists() and not (snapshot / SINGLE_NAME).exists():
        raise InputError(f"{source}: neither {INDEX_NAME} nor {SINGLE_NAME} is available (not cached, or offline)")
    if (snapshot / INDEX_NAME).exists():
        _fetch_missing_headers(repo_id, revision, snapshot, source)
    return open_local(
        snapshot, allow_pickle=allow_pickle, source=source, trust_root=repo_cache, read_headers=read_headers
    )


def _fetch_missing_headers(repo_id: str, revision: str | None, snapshot: Path, source: str) -> None:
    """Headers are read from cached shard files; say plainly which are missing rather than download terabytes."""

    from dayone.core import untrusted_json
    from huggingface_hub import constants

    index = untrusted_json.read(snapshot / INDEX_NAME, max_bytes=MAX_INDEX_BYTES)
    weight_map = index.get("weight_map", {}) if isinstance(index, dict) else {}
    if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
        raise InputError(f"{snapshot / INDEX_NAME}: weight_map must map tensor names to file names")
    check_names(set(weight_map.values()), str(snapshot / INDEX_NAME), "file name")
    missing = sorted({f for f in weight_map.values() if not (snapshot / f).exists()})
    if not missing:
        return
    why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "dayone does not download shard data to inspect"
    rev = f" --revision {revision}" if revision else ""
    raise InputError(
        f"{source}: {len(missing)} shards (e.g. {missing[0]}) are not in the HF cache and {why}; "
        f"fetch them with `hf download {repo_id}{rev}`"
    )
