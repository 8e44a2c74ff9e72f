"""The one error type users see: it names the offending key and the valid range.

The CLI turns any :class:`DPLabError` into a single line on stderr and exit code 2.
"""


class DPLabError(ValueError):
    """Bad input: a config key, a CLI flag or a setting outside an assumption."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


class AssumptionError(DPLabError):
    """A setting outside the validity region of an accountant."""

    def __init__(self, accountant: str, key: str, message: str):
        self.accountant = accountant
        DPLabError.__init__(self, key, f"{message} (accountant '{accountant}')")
