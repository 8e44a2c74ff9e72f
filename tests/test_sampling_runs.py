"""Training runs with epoch samplers (docs/sampling.md): a shuffled or
balls-in-bins run claims upper bounds only (summary.json ``epsilon``, metrics.csv
``epsilon_<name>``) and reports the lower bound and the Poisson comparison beside them, labelled
(``epsilon_lower``/``epsilon_comparison``, ``epsilon_bound``; ``epsilon_lower_<name>``,
``epsilon_comparison_<name>``), never as a claim: in the run, its sweep and the figures."""

from __future__ import annotations

import json

import dp_accounting
import numpy as np
import pandas as pd
import pytest
from dp_accounting.pld import pld_privacy_accountant

from dplab.training.summary import RunSummary
from dplab import accounting
from dplab.accounting.eligibility import KEYS
from dplab.cli import main
from dplab.errors import DPLabError
from dplab.figures import figure, runs
from dplab.training import data, loop
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

#: n = 200, b = 30: t = 6 steps per epoch, n mod b = 20 (add_remove with shuffle is valid); 5 epochs
RUN = {"dataset": "synthetic", "method": "dp_sgd", "batch_size": 30, "steps": 30, "log_every": 10}
SPECS = {
    # every registered accountant asked (accountants: null); σ calibrated by the
    # natural accountant for shuffle
    "shuffled": {"sampling": "shuffle", "target_epsilon": 4.0},
    "balls_in_bins": {
        "sampling": "balls_in_bins",
        "noise_multiplier": 2.0,
        "accountants": [
            "balls_in_bins",
            "fixed_batches",
            "balls_in_bins_lower",
            "shuffle_lower",
            "as_if_poisson",
            "pld",
        ],
    },
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sampling_runs")
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 200, "test_size": 20, "dim": 4, "feature_norm": 1.0},
        "synthetic",
    )
    data.write(folder / "data", *data.prepare(cfg, "synthetic"))
    dataset = data.load(folder / "data")
    for name, spec in SPECS.items():
        loop.train(
            RunSettings.of(resolve_run({**RUN, **spec, "name": name})), dataset, folder / name
        )
    return folder


def _read(folder, name) -> tuple[dict, pd.DataFrame]:
    return json.loads((folder / name / "summary.json").read_text()), pd.read_csv(
        folder / name / "metrics.csv"
    )


def _poisson_peer(summary: dict) -> float:
    """dp_accounting's PLD ε of Poisson sampling at q = b/n with the run's σ, T, δ and relation."""
    relation = {
        "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
    }[summary["neighbouring"]]
    acc = pld_privacy_accountant.PLDAccountant(
        neighboring_relation=relation, value_discretization_interval=1e-4
    )
    event = dp_accounting.GaussianDpEvent(summary["noise_multiplier"])
    acc.compose(
        dp_accounting.PoissonSampledDpEvent(summary["batch_size"] / summary["dataset_size"], event),
        summary["run"]["steps"],
    )
    return acc.get_epsilon(summary["delta"])


def _cli_pld(summary: dict, capsys) -> float:
    """`dplab epsilon --accountant pld` at q = b/n with the run's σ, T, δ and relation."""
    assert (
        main(
            [
                "epsilon",
                "--accountant",
                "pld",
                "--sampling",
                "poisson",
                "--sampling-rate",
                repr(summary["batch_size"] / summary["dataset_size"]),
                "--noise-multiplier",
                repr(summary["noise_multiplier"]),
                "--steps",
                str(summary["run"]["steps"]),
                "--delta",
                repr(summary["delta"]),
                "--neighbouring",
                summary["neighbouring"],
            ]
        )
        == 0
    )
    return json.loads(capsys.readouterr().out)["epsilon"]


def test_a_shuffled_run_claims_fixed_batches_only(trained, capsys):
    """Of every registered accountant, a shuffled DP-SGD run on an MLP-free, constant-free setting
    claims fixed_batches alone (which calibrated its σ to ε = 4); shuffle_lower is reported as a
    lower bound ≤ that claim, as_if_poisson as the comparison: dplab epsilon --accountant pld and
    dp_accounting's PLD at q = b/n, σ, T give the same number."""
    summary, metrics = _read(trained, "shuffled")
    assert summary["run"]["accountant"] == "fixed_batches"
    assert set(summary["epsilon"]) == {"fixed_batches"}
    assert summary["epsilon"]["fixed_batches"] <= 4.0 and summary["epsilon"][
        "fixed_batches"
    ] == pytest.approx(4.0, rel=1e-4)
    assert set(summary["epsilon_lower"]) == {"shuffle_lower"} and set(
        summary["epsilon_comparison"]
    ) == {"as_if_poisson"}
    assert summary["epsilon_bound"] == {
        "fixed_batches": "upper",
        "shuffle_lower": "lower",
        "as_if_poisson": "comparison",
    }
    assert 0 < summary["epsilon_lower"]["shuffle_lower"] <= summary["epsilon"]["fixed_batches"]
    comparison = summary["epsilon_comparison"]["as_if_poisson"]
    assert comparison == pytest.approx(_cli_pld(summary, capsys), rel=1e-9)
    assert comparison == pytest.approx(_poisson_peer(summary), rel=1e-6)
    assert set(summary["epsilon_covers"]) == {"fixed_batches"}
    for name in ("pld", "rdp", "balls_in_bins", "balls_in_bins_lower"):
        assert name in summary["excluded_accountants"]
    eps_columns = {c for c in metrics.columns if c.startswith("epsilon_")}
    assert eps_columns == {
        "epsilon_fixed_batches",
        "epsilon_lower_shuffle_lower",
        "epsilon_comparison_as_if_poisson",
    }
    assert metrics.epsilon_fixed_batches.iloc[-1] == summary["epsilon"]["fixed_batches"]
    assert metrics.epsilon_lower_shuffle_lower.iloc[-1] == summary["epsilon_lower"]["shuffle_lower"]
    assert (metrics.epsilon_lower_shuffle_lower <= metrics.epsilon_fixed_batches).all()
    assert metrics.epsilon_comparison_as_if_poisson.is_monotonic_increasing


def test_a_balls_in_bins_run_claims_its_upper_bounds_only(trained, capsys):
    summary, metrics = _read(trained, "balls_in_bins")
    assert summary["epsilon_bound"] == {
        "balls_in_bins": "upper",
        "fixed_batches": "upper",
        "balls_in_bins_lower": "lower",
        "as_if_poisson": "comparison",
    }
    assert set(summary["epsilon"]) == {"balls_in_bins", "fixed_batches"}
    upper = min(summary["epsilon"].values())
    assert summary["epsilon"]["balls_in_bins"] <= summary["epsilon"]["fixed_batches"]
    assert 0 < summary["epsilon_lower"]["balls_in_bins_lower"] <= upper
    comparison = summary["epsilon_comparison"]["as_if_poisson"]
    assert comparison == pytest.approx(_cli_pld(summary, capsys), rel=1e-9)
    assert comparison == pytest.approx(_poisson_peer(summary), rel=1e-6)
    assert "sampling" in summary["excluded_accountants"]["shuffle_lower"]
    assert "sampling" in summary["excluded_accountants"]["pld"]
    assert (metrics.epsilon_lower_balls_in_bins_lower <= metrics.epsilon_balls_in_bins).all()


@pytest.mark.parametrize("name", ["shuffle_lower", "as_if_poisson"])
def test_calibrating_with_a_lower_bound_or_a_comparison_is_refused_at_resolve_time(
    name, tmp_path, capsys
):
    with pytest.raises(DPLabError, match="not a guarantee") as err:
        resolve_run(
            {**RUN, "sampling": "shuffle", "target_epsilon": 1.0, "accountant": name},
            where="runs.x",
        )
    assert err.value.key == "runs.x.accountant" and "fixed_batches" in str(err.value)
    resolve_run(
        {**RUN, "sampling": "shuffle", "noise_multiplier": 1.0, "accountant": name}
    )  # nothing to calibrate
    out = tmp_path / "run"
    run_json = json.dumps({**RUN, "sampling": "shuffle", "target_epsilon": 1.0, "accountant": name})
    assert (
        main(["train", "--run-json", run_json, "--data", str(tmp_path / "none"), "--out", str(out)])
        == 2
    )
    assert "accountant: " in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("name", ["shuffled", "balls_in_bins"])
def test_the_sweep_of_a_run_labels_each_rows_bound(trained, tmp_path, name):
    """dplab sweep of the run's summary: claims, lower bounds and comparisons each with their
    bound and the run's own values at its last step; pld refused with the run's reason."""
    summary, _ = _read(trained, name)
    reported = summary["epsilon_bound"]
    out = tmp_path / "sweep.csv"
    assert (
        main(
            [
                "sweep",
                "--summary",
                str(trained / name / "summary.json"),
                "--accountants",
                *reported,
                "pld",
                "--points",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out)
    for accountant, kind in reported.items():
        rows = table[table.accountant == accountant]
        assert (rows["bound"] == kind).all() and rows.epsilon.notna().all()
        assert rows.set_index("steps").epsilon[30] == pytest.approx(
            summary[KEYS[kind]][accountant], rel=1e-9
        )
    pld = table[table.accountant == "pld"]
    assert (
        len(pld) == 1
        and pld.epsilon.isna().all()
        and pld.reason.iloc[0] == summary["excluded_accountants"]["pld"]
    )


def test_figures_never_take_a_lower_bound_or_a_comparison_for_a_claim(trained, tmp_path):
    """hidden_state_gain: reference rows carry their bound, no gain, and stay out of the best
    composition ε (as_if_poisson is below fixed_batches here: taken for a claim it would be the
    best); forged into summary.json's `epsilon` and an `epsilon_<name>` column, it is a refused
    row.  The ε the other run figures read (runs.claimed_epsilon) refuses both kinds."""
    summary, metrics = _read(trained, "shuffled")
    assert summary["epsilon_comparison"]["as_if_poisson"] < summary["epsilon"]["fixed_batches"]
    table = figure("hidden_state_gain").table(
        {
            "summaries": [str(trained / "shuffled" / "summary.json")],
            "metrics": [str(trained / "shuffled" / "metrics.csv")],
        },
        {"runs": ["shuffled"], "skip": []},
    )
    claimed = table[table.accountant == "fixed_batches"]
    np.testing.assert_array_equal(
        claimed.best_composition.to_numpy(), metrics.epsilon_fixed_batches.to_numpy()
    )
    for name, kind in (("shuffle_lower", "lower"), ("as_if_poisson", "comparison")):
        rows = table[table.accountant == name]
        assert len(rows) == len(metrics) and (rows["bound"] == kind).all()
        assert rows.gain.isna().all() and rows.best_composition.isna().all()
    legend = [
        t.get_text()
        for t in figure("hidden_state_gain").draw(table).axes[0].get_legend().get_texts()
    ]
    assert sum("NOT a guarantee" in text for text in legend) == 2

    for name in ("shuffle_lower", "as_if_poisson"):
        with pytest.raises(DPLabError, match="reports no ε"):
            runs.claimed_epsilon(RunSummary.of(summary), name, "figures.x")
    forged = json.loads(json.dumps(summary))
    kind = forged["epsilon_bound"].pop("as_if_poisson")
    forged["epsilon"]["as_if_poisson"] = forged[KEYS[kind]].pop("as_if_poisson")
    forged["epsilon_covers"]["as_if_poisson"] = "every iterate"
    (tmp_path / "summary.json").write_text(json.dumps(forged))
    metrics.rename(columns={"epsilon_comparison_as_if_poisson": "epsilon_as_if_poisson"}).to_csv(
        tmp_path / "metrics.csv", index=False
    )
    with pytest.raises(DPLabError, match="not a guarantee"):
        runs.claimed_epsilon(RunSummary.of(forged), "as_if_poisson", "figures.x")
    table = figure("hidden_state_gain").table(
        {"summaries": [str(tmp_path / "summary.json")], "metrics": [str(tmp_path / "metrics.csv")]},
        {"runs": ["shuffled"], "skip": []},
    )
    refused = table[table.accountant == "as_if_poisson"]
    assert (
        len(refused) == 1
        and refused.epsilon.isna().all()
        and "not a guarantee" in refused.reason.iloc[0]
    )
    np.testing.assert_array_equal(
        table[table.accountant == "fixed_batches"].best_composition.to_numpy(),
        metrics.epsilon_fixed_batches.to_numpy(),
    )


def test_reference_columns_cannot_be_taken_for_a_claim_column():
    """metrics.csv: `epsilon_<name>` is a claim; no accountant is named so that
    `epsilon_<name>` could read as `epsilon_lower_…` or `epsilon_comparison_…`."""
    for name in accounting.names():
        assert not name.startswith(("lower_", "comparison_")), name
