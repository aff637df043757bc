"""dayone: day-one integration of new open-weight LLMs."""


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs a fifth of `integrate --help`, which never needs it.
    if name != "__version__":
        raise AttributeError(f"module 'dayone' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    global __version__
    try:
        __version__ = version("dayone")
    except PackageNotFoundError:  # running from a source tree that was never installed
        __version__ = "0+unknown"
    return __version__
