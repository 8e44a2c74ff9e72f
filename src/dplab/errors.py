"""The errors users see: one line naming the offending key (or file) and the valid range or fix.

The CLI (:func:`dplab.cli.main`) turns a :class:`DPLabError` (bad input) into exit code 2; a
:class:`RunFailed` (valid input, but the run failed: training diverged), an ``OSError`` or a
``MemoryError`` (a write failed, a full disk, memory ran out) into exit code 3; anything else is an
internal error, exit code 1.  Each is a single line on stderr; ``dplab --debug`` adds the traceback.
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


class RunFailed(RuntimeError):
    """A valid run that failed (exit code 3): nothing about the input to fix, the
    run itself went wrong."""


class Diverged(RunFailed):
    """Training diverged: the loss or the parameters became NaN/inf ``where`` (e.g. "at step 7")."""

    def __init__(self, where: str, lr: float):
        self.where = where
        super().__init__(
            f"training diverged: the loss or the parameters became NaN/inf {where} "
            f"(lr = {lr:g}); lower lr (or clip)"
        )
