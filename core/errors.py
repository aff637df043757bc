"""The one error type users see: bad input named in one line, exit code 2, no traceback."""


class InputError(Exception):
    """Unreadable or invalid input (config, spec, checkpoint, golden file). The message is one line that names
    the file, tensor or field and says what is wrong; the CLI prints it and exits with code 2."""

    exit_code = 2
