"""The command line: every subcommand and flag is described; bad input exits 2 with one line."""

from __future__ import annotations

import argparse

import pytest

from dplab.cli import build_parser, main


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_subcommand_and_flag_has_help():
    subs = _subparsers()
    assert subs, "no subcommands registered"
    for name, sub in subs.items():
        assert sub.description, f"dplab {name} has no description"
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"dplab {name} {action.option_strings or action.dest} has no help"


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_help_exits_zero(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    assert "usage: dplab" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "x.csv"
    code = main(["sweep", "--summary", str(tmp_path / "missing.json"), "--accountants", "rdp", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "summary" in err
    assert not out.exists()
