"""The command line: every subcommand and flag is described; bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import json

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
    code = main(
        [
            "sweep",
            "--summary",
            str(tmp_path / "missing.json"),
            "--accountants",
            "rdp",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "summary" in err
    assert not out.exists()


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_reader_that_closes_the_pipe_gets_no_error_line():
    """`dplab accountants | head` printed "error: BrokenPipeError" and exited 3 (a failed run): the
    reader wanted no more. Now exit 141 (128 + SIGPIPE, the shell's code) and nothing on stderr,
    also where the closed pipe shows only when stdout is flushed."""
    import subprocess
    import sys

    from conftest import tool_env

    small = "epsilon --accountant naive --noise-multiplier 1 --sampling full_batch --steps 1"
    for command in (["accountants"], [*small.split(), "--delta", "1e-5"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "dplab.cli", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=tool_env(),
        )
        proc.stdout.close()  # before the first write: every write meets a closed pipe
        assert proc.wait(timeout=120) == 141, command
        assert proc.stderr.read() == b"", command


@pytest.mark.parametrize(
    "raised, code",
    [
        (OSError(28, "No space left on device"), 3),
        (MemoryError(), 3),
        (RuntimeError("a bug"), 1),
        (KeyboardInterrupt(), 130),
    ],
)
def test_failures_that_are_not_bad_input_are_one_line_with_their_exit_code(
    monkeypatch, capsys, raised, code
):
    """Exit codes (README, Command line): 2 bad input, 3 a valid run that failed (I/O, memory),
    1 an internal error, 130 interrupted; one line without --debug, the traceback with it."""
    from dplab.commands import accounting

    def fail(args):
        raise raised

    monkeypatch.setattr(accounting, "cmd_accountants", fail)
    assert main(["accountants"]) == code
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("dplab accountants: error: ") and ("--debug" in line) == (code == 1)
    assert main(["--debug", "accountants"]) == code
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "10",
            "--delta",
            "1e-5",
            "--delta",
            "1e-6",
        ],
        ["epsilon", "--accountant", "rdp", "--accountant", "pld", "--delta", "1e-5"],
        [
            "sweep",
            "--summary",
            "s.json",
            "--accountants",
            "rdp",
            "--accountants",
            "pld",
            "--out",
            "x.csv",
        ],
        ["train", "--run-json", "{}", "--data", "d", "--out", "a", "--out", "b"],
        ["train", "--run-json", "{}", "--run-json", "{}", "--data", "d", "--out", "a"],
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            "t.csv",
            "--pdf",
            "a.pdf",
            "--png",
            "a.png",
            "--pdf",
            "b.pdf",
        ],
    ],
)
def test_a_flag_given_twice_is_refused(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and "given twice" in _one_line(capsys.readouterr().err)


def test_the_cli_uses_argparse_through_its_public_api_only():
    """No private name of argparse (``argparse._HelpAction``, ``_add_action``, ``_actions``,
    ``_name_parser_map``, ``_registry_get``…) is used, overridden or read
    anywhere in the package."""
    import ast

    from dplab import imports

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    group = parser.add_mutually_exclusive_group()
    private = {
        name
        for obj in (parser, subparsers, group, argparse.HelpFormatter("p"))
        for name in [*dir(obj), *vars(obj)]
        if name.startswith("_") and not name.endswith("__")
    }
    assert {
        "_add_action",
        "_actions",
        "_name_parser_map",
        "_option_string_actions",
        "_registry_get",
    } <= private
    found = []
    for path in imports.modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.name
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else None
            )
            argparse_private = (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "argparse"
                and node.attr.startswith("_")
            )
            if name in private or argparse_private:
                found.append(f"{path.name}:{node.lineno}: {name}")
    assert not found, found


def test_sigma_refuses_the_noise_multiplier_it_computes(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "sigma",
                "--accountant",
                "rdp",
                "--noise-multiplier",
                "3",
                "--sampling-rate",
                "0.01",
                "--steps",
                "10",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
            ]
        )
    assert exit_.value.code == 2 and "--noise-multiplier" in _one_line(capsys.readouterr().err)


def _writers(bad: str, tmp) -> list[list[str]]:
    """One command line of every command that writes, with ``bad`` as its output; every other
    argument points at nothing, so a command that checked anything else first would name that."""
    none = str(tmp / "none")
    return [
        ["train", "--run-json", "{}", "--data", none, "--out", bad],
        ["sweep", "--summary", none, "--accountants", "rdp", "--out", bad],
        ["audit", "--audit-json", "{}", "--data", none, "--out", bad],
        ["mf", "--strategy", "banded", "--steps", "0", "--out", bad],
        ["figure-table", "grad_norms", "--params-json", "{", "--inputs", none, "--out", bad],
        ["figure-draw", "grad_norms", "--table", none, "--pdf", bad, "--png", str(tmp / "ok.png")],
        ["figure-draw", "grad_norms", "--table", none, "--pdf", str(tmp / "ok.pdf"), "--png", bad],
        ["prepare-data", "--dataset-json", "{", "--out", bad],
        ["index", "--results", none, "--out", bad],
        ["provenance", "--config-json", "{", "--out", bad],
    ]


def test_every_command_checks_its_outputs_before_anything_else(tmp_path, capsys):
    """An output under a file: one line naming the flag, exit 2, before any input is read."""
    afile = tmp_path / "a_file"
    afile.write_text("x")
    for argv in _writers(str(afile / "out"), tmp_path):
        assert main(argv) == 2, argv
        flag = argv[argv.index(str(afile / "out")) - 1]
        assert _one_line(capsys.readouterr().err).startswith(f"dplab {argv[0]}: error: {flag}: "), (
            argv
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing written


def test_audit_json_is_validated_with_the_config_schema(capsys):
    from dplab.commands.audit import _audit_entry

    entry = {
        "threat_model": "input_canary",
        "dataset": "digits",
        "run": {"lr": 0.5},
        "methods": {"dp_sgd": {}},
        "steps": [1, 4],
    }
    full = _audit_entry(json.dumps({**entry, "seed": 3}))
    assert (full["seed"], full["name"], full["runs"], full["chunk"], full["confidence"]) == (
        3,
        "audit",
        64,
        64,
        0.95,
    )
    for bad, key in [
        (entry, "--audit-json.seed"),
        ({**entry, "seed": 0, "runs": 0}, "--audit-json.runs"),
        ({**entry, "seed": 0, "bogus": 1}, "--audit-json.bogus"),
        ({**entry, "seed": 0, "neighbouring": "add_remove"}, "neighbouring"),  # before the data
        ([1], "--audit-json"),
    ]:
        assert (
            main(["audit", "--audit-json", json.dumps(bad), "--data", "none", "--out", "none.csv"])
            == 2
        )
        assert f"error: {key}: " in _one_line(capsys.readouterr().err)


@pytest.mark.pipeline
def test_figure_input_errors_are_one_line_exit_2(built, tmp_path, capsys):
    """figure-table and figure-draw on inputs that are not theirs: a missing file, garbage text or
    bytes, an empty file, a table without the columns, another figure's table or result file."""
    results = built / "results"
    sweep, summary = (
        str(results / "accounting" / "dp_sgd.csv"),
        str(results / "runs" / "dp_sgd" / "summary.json"),
    )
    garbage, binary, empty, columns = (
        tmp_path / n for n in ("garbage.csv", "binary.csv", "empty.csv", "columns.csv")
    )
    garbage.write_text("this is not a table {\n")
    binary.write_bytes(bytes(range(256)) * 4)
    empty.write_text("")
    columns.write_text("a,b\n1,2\n")
    tables = {
        f: str(results / "tables" / f"{f}.csv") for f in ("accountants_vs_pld", "gaussian_sigma")
    }
    out = ["--out", str(tmp_path / "t.csv")]
    params = ["--params-json", '{"sweep": "dp_sgd"}']
    for inputs, flag in [
        ([sweep, str(tmp_path / "missing.json")], "--inputs"),
        ([summary, sweep], "--inputs"),
        ([sweep, str(garbage)], "--inputs"),
        ([sweep, str(binary)], "--inputs"),
        ([sweep, str(empty)], "--inputs"),
        ([str(columns), summary], "--inputs"),
        ([sweep], "--inputs"),
    ]:
        inputs = [f"{name}={path}" for name, path in zip(("sweep", "summary"), inputs)]
        assert (
            main(["figure-table", "accountants_vs_pld", *params, "--inputs", *inputs, *out]) == 2
        ), inputs
        line = _one_line(
            capsys.readouterr().err
        )  # names the flag, or the input file (and the command that writes it)
        assert any(
            f"error: {key}: " in line for key in (flag, *(arg.split("=", 1)[1] for arg in inputs))
        ), inputs
    assert (
        main(
            [
                "figure-table",
                "accountants_vs_pld",
                "--params-json",
                "{}",
                "--inputs",
                f"sweep={sweep}",
                f"summary={summary}",
                *out,
            ]
        )
        == 2
    )
    assert "error: figures.accountants_vs_pld.sweep: is required" in _one_line(
        capsys.readouterr().err
    )
    draw = ["--pdf", str(tmp_path / "f.pdf"), "--png", str(tmp_path / "f.png")]
    for figure, table in [
        ("accountants_vs_pld", tables["gaussian_sigma"]),
        ("gaussian_sigma", tables["accountants_vs_pld"]),
        *(
            ("gaussian_sigma", str(p))
            for p in (tmp_path / "missing.csv", garbage, binary, empty, columns)
        ),
    ]:
        assert main(["figure-draw", figure, "--table", table, *draw]) == 2, (figure, table)
        assert "error: --table: " in _one_line(capsys.readouterr().err), (figure, table)
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "f.pdf").exists()
    assert (
        main(["figure-draw", "gaussian_sigma", "--table", tables["gaussian_sigma"], *draw]) == 0
    )  # its own table
