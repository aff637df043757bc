"""Package versions and the build timestamp.

    <generator version>+spec.<spec sha256, 8 hex>                 without --revision
    <generator version>+spec.<spec sha256, 8 hex>.rev.<revision>  with --revision REV
    <generator version>                                           with --public-version

The spec has no version of its own: the generated code is a function of the dayone release that generated it (read
from the files' headers) and of the spec's content, so the public part is the generator's version and the local
label pins the spec by its digest (the digest in the generated headers) and the checkpoint revision (a commit hash is
cut to 12 hex digits; a branch or tag is lowercased, other characters become dots). PyPI refuses local versions:
`--public-version` drops the label for an upload there; the spec digest and the revision stay in the README and
model card.

SOURCE_DATE_EPOCH: neither the spec nor a revision carries a date, so builds use a fixed one (1980-01-02, the zip
format's first year plus a day, so that no timezone takes it before 1980) unless the environment sets
SOURCE_DATE_EPOCH (a workflow may use its commit's time). Same inputs, same epoch, same bytes.
"""

from __future__ import annotations

import os
import re

from dayone.core.errors import InputError

DEFAULT_EPOCH = 315619200  # 1980-01-02T00:00:00Z
ZIP_EPOCH = 315532800  # 1980-01-01: zip timestamps cannot be earlier
COMMIT = re.compile(r"[0-9a-fA-F]{7,64}")


def revision_label(revision: str) -> str:
    rev = revision.strip()
    if COMMIT.fullmatch(rev):
        return rev.lower()[:12]
    label = re.sub(r"[^a-z0-9]+", ".", rev.lower()).strip(".")
    if not label:
        raise InputError(f"--revision {revision!r}: has no letters or digits to put in a version")
    return label


def package_version(generator_version: str, spec_digest: str, revision: str | None, public: bool) -> str:
    from packaging.version import InvalidVersion, Version  # comes with PyPA build, which the stage needs anyway

    try:
        base = Version(generator_version).public
    except InvalidVersion:
        base = "0"  # a dayone run from a source tree without metadata ("0+unknown")
    if public:
        return base
    local = f"spec.{spec_digest[:8]}" + (f".rev.{revision_label(revision)}" if revision else "")
    return str(Version(f"{base}+{local}"))


def source_date_epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None or value == "":
        return DEFAULT_EPOCH
    if not value.isdigit() or int(value) < ZIP_EPOCH:
        raise InputError(f"SOURCE_DATE_EPOCH={value!r}: expected whole seconds since 1970, at least {ZIP_EPOCH} (1980)")
    return int(value)
