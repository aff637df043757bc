"""dayone: day-one integration of new open-weight LLMs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dayone")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
