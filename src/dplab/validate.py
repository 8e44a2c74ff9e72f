"""The small checks of single numbers every layer makes: one line naming the key and the valid
range (a :class:`~dplab.errors.DPLabError`, exit code 2 on the command line)."""

from __future__ import annotations

import math
from numbers import Real

from dplab.errors import DPLabError

#: the most torch CPU threads a command accepts (``--threads``)
MAX_THREADS = 1024


def number(key: str, value, what: str = "a number"):
    """``value``, refused unless a real number (not a bool): a field read from a file may hold
    text, a list or null; ``what`` says what it must be in the message."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DPLabError(key, f"must be {what}; got {value!r}")
    return value


def positive(key: str, value: float) -> float:
    """``value`` as a float, refused unless finite and > 0."""
    if not (math.isfinite(value) and value > 0):
        raise DPLabError(key, f"must be a finite number > 0; got {value}")
    return float(value)


def integer(key: str, value, low: int = 1, high: int | None = None, high_name: str = "") -> int:
    """``value`` as an int, refused unless a whole number (not a bool, nor text, null or inf read
    from a file) >= ``low`` (and <= ``high``, named ``high_name`` in the message, when given)."""
    whole = (
        isinstance(value, Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and int(value) == value
    )
    if high is None:
        if not (whole and value >= low):
            raise DPLabError(key, f"must be an integer >= {low}; got {value!r}")
    elif not (whole and low <= value <= high):
        raise DPLabError(key, f"must be an integer in [{low}, {high_name}={high}]; got {value!r}")
    return int(value)


def at_least(key: str, value, low: int) -> None:
    """Refuse a count below ``low`` (argparse has already made it an int)."""
    if value < low:
        raise DPLabError(key, f"must be >= {low}; got {value}")


def json_value(flag: str, text: str):
    """The value of a ``--*-json`` argument (:func:`dplab.inputs.loads`: no key twice), refused with
    the parser's message when not JSON."""
    from dplab.inputs import DuplicateKey, loads

    try:
        return loads(text)
    except DuplicateKey as err:
        raise DPLabError(flag, str(err)) from None
    except ValueError as err:  # json.JSONDecodeError included
        raise DPLabError(flag, f"not valid JSON: {err}") from None
