"""The errors users see: one line naming the offending key (or file) and the valid range or fix.

The CLI (:func:`dplab.cli.main`) turns a :class:`DPLabError` (bad input) into exit code 2, an
``OSError`` or ``MemoryError`` (valid input, but a write failed or memory ran out) into exit code 3;
anything else is an internal error, exit code 1.  Each is a single line on stderr; ``dplab --debug``
adds the traceback.
"""


class DPLabError(ValueError):
    """Bad input: a config key, a CLI flag or a setting outside an assumption."""

    def __init__(self, key: str, message: str):
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}")


class AssumptionError(DPLabError):
    """A setting outside the validity region of an accountant."""

    def __init__(self, accountant: str, key: str, message: str):
        self.accountant = accountant
        DPLabError.__init__(self, key, f"{message} (accountant '{accountant}')")

