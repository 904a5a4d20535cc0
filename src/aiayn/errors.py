"""The one exception type that the CLI turns into a one-line error message (no traceback)."""


class AiaynError(Exception):
    """A user-facing error: bad input, a missing file or package, an impossible setting.

    The message must say what is wrong and where (a file and line when there is one).
    """


class TextError(AiaynError):
    """An error about one text of a list: `index` (0-based) says which, `reason` what went wrong.

    A server that translated the texts of several requests in one call finds with `index` whose
    text it was, and tells only that caller (aiayn.serve.batcher).
    """

    def __init__(self, index: int, reason: str):
        super().__init__(f"text {index + 1}: {reason}")
        self.index, self.reason = index, reason
