"""The one exception type that the CLI turns into a one-line error message (no traceback)."""


class AiaynError(Exception):
    """A user-facing error: bad input, a missing file or package, an impossible setting.

    The message must say what is wrong and where (a file and line when there is one).
    """
