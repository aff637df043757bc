"""Shipping what the pipeline built: GitHub releases (github.py) and the Hugging Face Hub (hub.py)."""


class PublishError(Exception):
    """The remote side refused or disagrees (an asset with other bytes, an API error). One line; exit code 1.

    Bad input on our side (missing token, unreadable DIST) is an InputError (exit code 2) instead."""

    exit_code = 1
