"""The claims table: verdicts computed from the numbers and the tolerance,
every row sourced and regenerable, the σ rows equal to what ``dplab sigma`` prints."""

from __future__ import annotations

import json
import math
import shlex

import pandas as pd
import pytest

from conftest import ROOT
from dplab import layout
from dplab.cli import main
from dplab.config import load_config
from dplab.figures import claims, techniques_table
from dplab.tables import read_table, write_table
from figure_params import default_params

COLUMNS = [
    "source",
    "section",
    "statement",
    "source_value",
    "ours",
    "tolerance",
    "test",
    "verdict",
    "reason",
    "result_file",
    "command",
]
EMPTY = {name: [] for name in claims.INPUTS}


@pytest.mark.parametrize(
    "source, ours, test, tol, relative, expected",
    [
        (32, 33.5, "≈", 3.0, False, "holds"),  # 004 §3.2: quantile "around 32"
        (32, 6.24, "≈", 3.0, False, "differs"),  # the digits quantile
        (32, 35.0, "≈", 3.0, False, "holds"),  # exactly at the tolerance
        (1051, 1070.16, "≈", 1.0, False, "differs"),  # 004 §2's 1051 against its own formula
        (806, 805.76, "≈", 1.0, False, "holds"),
        (0.5, 0.14, "≤", 0.0, False, "holds"),  # "way smaller" noise
        (0.5, 0.51, "≤", 0.0, False, "differs"),
        (0.0, -0.04, "≥", 0.05, False, "holds"),  # "competitive": within 5 points below
        (0.0, -0.35, "≥", 0.05, False, "differs"),
        (2.15, 2.1522, "≈", 0.01, True, "holds"),  # Tramèr & Boneh's σ within 1 %
        (2.15, 2.2, "≈", 0.01, True, "differs"),
        (-0.5, -0.45, "≈", 0.1, True, "holds"),  # relative to |source|
        (None, 0.8, "≈", 0.0, False, "not checkable here"),
        (0.86, None, "≈", 0.015, False, "not checkable here"),
        (0.86, math.nan, "≈", 0.015, False, "not checkable here"),
    ],
)
def test_verdict_from_numbers_and_tolerance(source, ours, test, tol, relative, expected):
    assert claims.verdict(source, ours, test, tol, relative) == expected


def test_a_reason_makes_a_row_not_checkable_whatever_the_numbers():
    assert claims.verdict(32, 32, "≈", 3.0, why_not="figure only") == "not checkable here"


def number(value) -> float | None:
    return None if pd.isna(value) else float(value)


def recomputed(row) -> str:
    """The verdict of a claims.csv row from its own columns (source_value,
    ours, tolerance, test)."""
    test = {text: key for key, (text, _) in claims.TESTS.items()}[row.test]
    relative = row.tolerance.endswith("%")
    tol = float(row.tolerance.rstrip(" %")) / (100 if relative else 1)
    return claims.verdict(number(row.source_value), number(row.ours), test, tol, relative)


def check_rows(table: pd.DataFrame) -> None:
    assert list(table.columns) == COLUMNS and len(table) >= 12
    for row in table.itertuples():
        assert all(
            isinstance(v, str) and v.strip()
            for v in (row.source, row.section, row.statement, row.result_file, row.command)
        ), row
        if row.verdict == "not checkable here" and recomputed(row) != row.verdict:
            assert isinstance(row.reason, str) and len(row.reason) > 20, (
                row
            )  # both numbers, but a reason why not
        else:
            assert row.verdict == recomputed(row), row
        assert (row.verdict == "holds") == (pd.isna(row.reason) or row.reason == ""), (
            row
        )  # a reason unless it holds


def sigma_printed(command: str, capsys) -> float:
    args = shlex.split(command)
    assert args[:2] == ["dplab", "sigma"]
    assert main(args[1:]) == 0
    return json.loads(capsys.readouterr().out)["noise_multiplier"]


def test_without_results_every_row_is_not_checkable_but_tramer_boneh_s_sigma(tmp_path, capsys):
    """No figure or run in the config: each statement says which result is missing; the σ of
    Tramèr & Boneh (computed here) is what `dplab sigma --accountant moments`
    prints: 2.152 ≈ 2.15."""
    table = claims.table(EMPTY, {"benchmark_run": None})
    path = tmp_path / "claims.csv"
    table.to_csv(path, index=False)
    table = pd.read_csv(path)
    check_rows(table)
    tb = table[table.source == claims.TB_SOURCE].set_index("verdict")
    assert tb.loc["holds", "ours"] == pytest.approx(
        sigma_printed(tb.loc["holds", "command"], capsys), rel=1e-12
    )
    assert tb.loc["holds", "ours"] == pytest.approx(2.15, rel=0.01)
    assert "--steps 1160" in tb.loc["holds", "command"]  # 40 epochs of ⌊60 000 / 2048⌋ = 29 steps
    assert "paper.yaml" in tb.loc["not checkable here", "reason"]
    others = table[table.statement != tb.loc["holds", "statement"]]
    assert set(others.verdict) == {"not checkable here"}
    assert others.reason.str.len().min() > 20


def test_table_i_exponents_are_from_the_sigma_dplab_prints(tmp_path, capsys):
    """000 Table I rows: ours = log(σ(4T)/σ(T))/log 4 with σ(T) from techniques_table and σ(4T)
    what the row's command prints; RDP's σ grows as √T (within 0.1), Langevin's not at all."""
    params = {**default_params("techniques_table"), "accountants": ["rdp", "langevin"]}  # T = 1000
    tables = tmp_path / "techniques_table.csv"
    write_table(tables, techniques_table.table({}, params))
    rows = claims.table({**EMPTY, "tables": [str(tables)]}, {})
    rows = rows[rows.source.str.startswith("000 ")]
    rows = rows.set_index(rows.statement.str.extract(r"\((\w+)\)")[0])
    sigma_t = read_table(tables, "table", "").set_index("accountant").noise_multiplier
    for name in ("rdp", "langevin"):
        later = sigma_printed(rows.loc[name, "command"], capsys)
        assert "--steps 4000" in rows.loc[name, "command"]
        assert rows.loc[name, "ours"] == pytest.approx(
            math.log(later / sigma_t[name]) / math.log(4), abs=1e-9
        )
        assert rows.loc[name, "verdict"] == "holds", rows.loc[name]
    assert rows.loc["pabi", "verdict"] == "not checkable here"  # not in this table


def test_default_config_checks_004_on_its_own_runs():
    """The rows read the runs the default config's figures name (004's
    experiment, whatever its data)."""
    config = load_config(ROOT / "config" / "config.yaml")
    inputs = claims.inputs(config, config["figures"]["claims"])
    figures = config["figures"]
    tries = [t["run"] for t in figures["dp_training_tries"]["tries"]]
    assert inputs["try_summaries"] == [layout.run_files(r)["summary"] for r in tries]
    assert inputs["nonprivate"][2] == layout.run_files(figures["grad_norms"]["run"])["grad_norms"]
    assert inputs["sweeps"] == [layout.sweep_file(figures["accountants_vs_pld"]["sweep"])]
    assert {
        layout.table_file(f) for f in ("sigma_vs_steps", "techniques_table", "gaussian_sigma")
    } <= set(inputs["tables"])


@pytest.mark.pipeline
def test_built_dag_writes_the_claims_table_first_in_the_report(built):
    """The small DAG (conftest) checks the statements its results allow: 004 §2's σ (1051 differs,
    an error in the source; Pei's 1026 and the analytic 806 hold); 003 §4 needs accountants its
    sweep does not run."""
    table = read_table(built / "results" / "tables" / "claims.csv", "claims table", "")
    check_rows(table)
    salary = table[table.section == "§2 (salary example)"].set_index("source_value")
    assert (
        salary.loc[1051, "verdict"],
        salary.loc[1026, "verdict"],
        salary.loc[806, "verdict"],
    ) == ("differs", "holds", "holds")
    assert "error in the source" in salary.loc[1051, "reason"]
    epochs = table[
        table.source.str.startswith("003 ") & (table.section == "§4")
    ]  # the small sweep: rdp, pld only
    assert list(epochs.reason) == [
        f"the sweep has no {name} ε" for name in ("naive", "advanced", "moments")
    ]
    html = (built / "results" / "report.html").read_text()
    assert '"Claims"' in html  # the report's category (workflow.rst names it only in prose)
    index = (built / "results" / "index.md").read_text()
    assert "tables/claims.csv" in index.split("| figure |")[0]  # before the figures' list
