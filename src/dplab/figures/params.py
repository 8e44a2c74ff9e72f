"""The JSON-schema pieces that figures' ``PARAMS`` share: a positive number (an ε, a σ, a step
size) and a number strictly between 0 and 1 (a δ, a sampling rate, a quantile)."""

from __future__ import annotations


def positive(default: float, description: str) -> dict:
    """A number > 0."""
    return {"type": "number", "exclusiveMinimum": 0, "default": default, "description": description}


def in_unit_interval(default: float, description: str) -> dict:
    """A number in (0, 1)."""
    return {
        "type": "number",
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 1,
        "default": default,
        "description": description,
    }
