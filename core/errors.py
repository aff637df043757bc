"""The one error type users see: bad input named in one line, exit code 2, no traceback."""

import contextlib
import errno
import os
import re
from collections.abc import Iterator


class InputError(Exception):
    """Unreadable or invalid input (config, spec, checkpoint, golden file). The message is one line that names
    the file, tensor or field and says what is wrong; the CLI prints it and exits with code 2."""

    exit_code = 2


# What the machine, not the program, gets wrong while writing: a full or read-only disk, an output under a regular
# file, no permission. Each is one line naming the path and the OS's reason; anything else is a bug and keeps its
# traceback.
_ENVIRONMENT = "ENOSPC EDQUOT EROFS ENOTDIR EISDIR EACCES EPERM ENAMETOOLONG EFBIG ELOOP EEXIST ENOTEMPTY EXDEV EIO"
ENVIRONMENT_ERRNOS = frozenset(getattr(errno, name) for name in _ENVIRONMENT.split() if hasattr(errno, name))


def environment_error_message(err: BaseException) -> str | None:
    """`path: reason` for an OSError of ENVIRONMENT_ERRNOS (the path the OS names, else none), None for any other
    exception."""
    if not isinstance(err, OSError) or err.errno not in ENVIRONMENT_ERRNOS:
        return None
    reason = err.strerror or os.strerror(err.errno)
    if err.errno == errno.EEXIST and err.filename is not None and not os.path.isdir(err.filename):
        reason = "exists and is not a folder"  # mkdir of an output's parent that is a regular file
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    return f"{' -> '.join(map(os.fsdecode, paths))}: {reason}" if paths else f"cannot write: {reason}"


@contextlib.contextmanager
def environment_errors_as_input() -> Iterator[None]:
    """An uncaught OSError of ENVIRONMENT_ERRNOS becomes the InputError naming the path and the reason (a full
    disk gave 29-55 lines of traceback across the writing commands)."""
    try:
        yield
    except OSError as err:
        message = environment_error_message(err)
        if message is None:
            raise
        raise InputError(message) from None


def as_os_error(err: Exception, path: object) -> Exception:
    """A library's error that carries the OS's in its text (safetensors: "I/O error: No space left on device (os
    error 28)") as the OSError naming `path`; any other error unchanged."""
    return environment_error_in(str(err), path, any_errno=True) or err


def environment_error_in(text: str, path: object, any_errno: bool = False) -> OSError | None:
    """The OSError naming `path` for the last OS error a tool's output reports ("(os error 28)", "[Errno 30]"), when
    it is one of ENVIRONMENT_ERRNOS (or any, with any_errno); else None."""
    codes = [int(code) for code in re.findall(r"\(os error (\d+)\)|\[Errno (\d+)\]", text) for code in code if code]
    codes = [code for code in codes if any_errno or code in ENVIRONMENT_ERRNOS]
    return OSError(codes[-1], os.strerror(codes[-1]), str(path)) if codes else None
