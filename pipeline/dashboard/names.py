"""Page file names from report text (spec, stage, target names): a readable slug and a hash of the whole text.

The slug keeps names recognisable in a URL; the hash keeps two names that slug alike ("a b", "a_b") apart and the
name short whatever the spec name's length (a file name over 255 bytes is an OSError on every common filesystem).
"""

from __future__ import annotations

import hashlib
import re

SLUG_CHARS = 40  # of each part; with the hash and the prefix a page name stays far below 255 bytes


def slug(text: str) -> str:
    """A file-name-safe, shortened form of one name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:SLUG_CHARS].strip("._") or "_"


def page_name(kind: str, *parts: str) -> str:
    """ "KIND-slug--slug-HASH.html" for the page of `parts` (the hash: of the parts as given, 10 hex digits)."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{kind}-{'--'.join(slug(p) for p in parts)}-{digest}.html"
