"""A few random mutations of the default config (tests/config_mutations.py), each given to
``dplab check-config``: every answer is a valid config or a refusal in one line."""

from __future__ import annotations

import config_mutations
import pytest

from conftest import ROOT

CONFIG = str(ROOT / "config" / "config.yaml")


@pytest.mark.parametrize("flags", [[], ["--numbers"]])
def test_mutations_are_answered_or_refused_in_one_line(flags, capsys):
    counts = config_mutations.main([CONFIG, "--seed", "3", "--count", "3", *flags])
    assert counts["internal"] == counts["untidy"] == []
    assert counts["ok"] + counts["refused"] == 3


def test_an_internal_error_is_counted_with_its_mutation(monkeypatch, capsys):
    """What the count is for: planning that raises (here on every config) is counted, with the
    change that met it."""

    def broken(config):
        raise TypeError("planning met a float")

    monkeypatch.setattr("dplab.jobs.check_config", broken)
    counts = config_mutations.main([CONFIG, "--seed", "3", "--count", "2"])
    assert len(counts["internal"]) == 2 and counts["internal"][0]["exit"] == 1
    assert "planning met a float" in counts["internal"][0]["stderr"]
    assert "internal:" in capsys.readouterr().out
