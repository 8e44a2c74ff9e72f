"""The claims table: verdicts computed from the numbers and the tolerance,
every row sourced and regenerable, the σ rows equal to what ``dplab sigma`` prints."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT
from dplab import layout
from dplab.cli import main
from dplab.config import load_config
from dplab.figures import asoodeh_projected, claims, gaussian_sigma, techniques_table
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


def _sigma_table(path) -> str:
    """A sigma_vs_steps table of two Poisson rates, q = 0.01 first: at q = 0.05 (004's) the
    subsampled σ/q equals DP-GD's σ, the moments σ grows as T^0.5 and σ_strong/σ_naive as T^−0.5;
    at q = 0.01 as T^0.1 and T^−0.1."""
    steps = [20, 50, 100, 200]
    rows = [("full_batch", 1.0, "rdp", 100, 10.0), ("full_batch", 1.0, "kairouz", 100, 40.0)]
    rows += [("full_batch", 1.0, "rdp", 200, 20.0)]
    for q, power, sgd in ((0.01, 0.1, 0.4), (0.05, 0.5, 1.0)):
        rows += [("poisson", q, "rdp", 200, sgd)]
        rows += [("poisson", q, "moments", t, t**power) for t in steps]
        rows += [("poisson", q, "naive", t, float(t)) for t in steps]
        rows += [("poisson", q, "advanced", t, t ** (1 - power)) for t in steps]
    columns = ["sampling", "sampling_rate", "curve", "steps", "noise_multiplier"]
    write_table(path, pd.DataFrame(rows, columns=columns))
    return str(path)


def test_sigma_rows_read_one_sampling_rate_of_a_two_rate_table(tmp_path):
    """config/paper.yaml draws q = 0.05 and 0.01: each row's numbers are all q = 0.05's."""
    rows = claims.table({**EMPTY, "tables": [_sigma_table(tmp_path / "sigma_vs_steps.csv")]}, {})
    row = rows.set_index(rows.statement.str.split(":").str[0]).loc
    subsampling = row["subsampling (Poisson q = 0.05, try 3's) gives 'basically the same noise "
                      "levels' as GD under RDP, T = 200"]  # fmt: skip
    assert (subsampling.ours, subsampling.verdict) == (pytest.approx(1.0), "holds")
    moments = row["moments accountant"]
    assert (moments.ours, moments.verdict) == (pytest.approx(0.5), "holds")
    assert row["σ_strong / σ_naive = O(T^(−1/2))"].ours == pytest.approx(-0.5)


def test_delta_row_of_001_is_the_limit_of_eq_5_and_can_differ(tmp_path):
    """eq. (5)'s δ stays under its T → ∞ limit pθ/(1 − (1 − p)θ) = 0.001383 (< 1, Fig. 1's
    setting); a δ of 1 differs."""
    params = default_params("asoodeh_projected")
    frame = asoodeh_projected.table({}, params)
    path = tmp_path / "asoodeh_projected.csv"

    def delta_row(frame):
        write_table(path, frame)
        rows = claims.table({**EMPTY, "tables": [str(path)]}, {})
        return rows[rows.section == "§I (after eq. (5))"].iloc[0]

    row = delta_row(frame)
    assert row.source_value == pytest.approx(0.001383, rel=1e-3) and row.verdict == "holds"
    assert row.ours <= row.source_value
    frame.loc[(frame.panel == "delta_vs_steps") & (frame.curve == "bound"), "delta"] = 1.0
    assert delta_row(frame).verdict == "differs"


def test_try_2_must_beat_try_1_strictly():
    """004 §3.3 says try 2 does better: an equal accuracy differs."""
    rows = claims.table(EMPTY, {"benchmark_run": None})
    row = rows[rows.statement.str.contains("accuracy of try 2 − try 1 > 0")].iloc[0]
    test = {text: key for key, (text, _) in claims.TESTS.items()}[row.test]
    assert claims.verdict(0.0, 0.0, test, 0.0) == "differs"
    assert claims.verdict(0.0, 0.01, test, 0.0) == "holds"


@pytest.mark.parametrize("names", [["renamed/sigma_vs_steps_v2.csv"], ["a/gaussian_sigma.csv"] * 2])
def test_a_table_the_claims_cannot_name_is_refused(tmp_path, capsys, names):
    """The rows know a table by its file name: another name, or one figure twice, is refused."""
    params = {**default_params("gaussian_sigma")}
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write_table(tmp_path / name, gaussian_sigma.table({}, params))
    (tmp_path / "b").mkdir()
    paths = [str(tmp_path / names[0])] + [str(tmp_path / "b" / Path(n).name) for n in names[1:]]
    for p in paths[1:]:
        write_table(p, gaussian_sigma.table({}, params))
    out = tmp_path / "claims.csv"
    inputs = [f"tables={p}" for p in paths]
    argv = ["figure-table", "claims", "--params-json", "{}", "--inputs", *inputs]
    assert main([*argv, "--out", str(out)]) == 2
    assert f"error: --inputs: tables={paths[-1]}: " in capsys.readouterr().err
    assert not out.exists()
