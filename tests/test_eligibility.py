"""One function decides which accountants a run may claim: training, sweeps and
figure tables all ask dplab.accounting.eligibility.refusal, from what summary.json records."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from conftest import summary_json
from dplab.training.summary import RunSummary
from dplab import accounting
from dplab.accounting.eligibility import (
    KEYS,
    OTHER_NOISE,
    Update,
    defaults,
    exclusion,
    from_summary,
    key,
    refusal,
)
from dplab.accounting.sweep import sweep
from dplab.cli import main
from dplab.errors import DPLabError
from dplab.figures import figure
from dplab.training import data, loop
from dplab.training.resolve import resolve_run
from dplab.tables import write_table
from dplab.training.settings import RunSettings

RUN = {
    "dataset": "synthetic",
    "batch_size": 20,
    "steps": 30,
    "log_every": 10,
    "noise_multiplier": 2.0,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two trained runs on one synthetic dataset: projected DP-SGD (Poisson, the update divides by
    the realized |B|) and plain DP-SGD (divides by b)."""
    folder = tmp_path_factory.mktemp("claims")
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 200, "test_size": 20, "dim": 4, "feature_norm": 1.0},
        "synthetic",
    )
    data.write(folder / "data", *data.prepare(cfg, "synthetic"))
    dataset = data.load(folder / "data")
    specs = {
        "projected": {"method": "projected_dp_sgd", "diameter": 2.0, "neighbouring": "replace_one"},
        "dp_sgd": {"method": "dp_sgd"},
    }
    for name, spec in specs.items():
        loop.train(
            RunSettings.of(resolve_run({**RUN, **spec, "name": name})), dataset, folder / name
        )
    return folder


def _summary(folder, name) -> dict:
    return json.loads((folder / name / "summary.json").read_text())


def test_sweep_of_a_projected_run_gives_pld_no_curve(runs, tmp_path):
    """A run that excludes pld (realized |B|); `dplab sweep --summary
    --accountants pld` writes one row with an empty ε and that reason, never a curve."""
    summary = _summary(runs, "projected")
    assert (
        "pld" not in summary["epsilon"]
        and "realized batch size" in summary["excluded_accountants"]["pld"]
    )
    out = tmp_path / "pld.csv"
    assert (
        main(
            [
                "sweep",
                "--summary",
                str(runs / "projected" / "summary.json"),
                "--accountants",
                "pld",
                "--points",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out)
    assert len(table) == 1 and table.epsilon.isna().all()
    assert table.reason.iloc[0] == summary["excluded_accountants"]["pld"]


@pytest.mark.parametrize("name", ["projected", "dp_sgd"])
def test_sweep_from_a_summary_reproduces_the_run_exactly(runs, name):
    """For every accountant: refused by the sweep iff the run excluded it (same reason), and the
    same ε at the run's last step where claimed."""
    summary = _summary(runs, name)
    setting, update = from_summary(RunSummary.of(summary))
    table = sweep(setting, summary["delta"], defaults(), np.array([10, 30]), update)
    for accountant, rows in table.groupby("accountant"):
        if accountant in summary[key(accountant)]:
            assert rows.set_index("steps").epsilon[30] == pytest.approx(
                summary[key(accountant)][accountant], rel=1e-9
            )
        else:
            assert (
                len(rows) == 1
                and rows.reason.iloc[0] == summary["excluded_accountants"][accountant]
            )
    reported = set().union(*(summary[key] for key in KEYS.values()))
    assert reported | set(summary["excluded_accountants"]) == set(defaults())


def test_accountants_vs_pld_asks_again_from_the_summary(runs, tmp_path):
    """A sweep CSV carrying curves the run may not claim (written by an older sweep, or by hand):
    the figure table turns each into one refused row; without a valid pld curve it refuses."""
    summary = _summary(runs, "dp_sgd")
    setting, _ = from_summary(RunSummary.of(summary))
    steps = np.array([1, 10, 30])
    forged = sweep(setting, summary["delta"], ["pld", "rdp"], steps)
    forged = pd.concat(
        [forged, forged[forged.accountant == "rdp"].assign(accountant="langevin")],
        ignore_index=True,
    )
    path = tmp_path / "sweep.csv"
    write_table(path, forged)
    table = figure("accountants_vs_pld").table(
        {"sweep": str(path), "summary": str(runs / "dp_sgd" / "summary.json")}, {"sweep": "s"}
    )
    langevin = table[table.accountant == "langevin"]
    assert (
        len(langevin) == 1
        and langevin.epsilon.isna().all()
        and "(accountant 'langevin')" in langevin.reason.iloc[0]
    )
    assert table[table.accountant == "pld"].epsilon.notna().sum() == 3

    projected = _summary(runs, "projected")
    forged = sweep(
        from_summary(RunSummary.of(projected))[0], projected["delta"], ["pld"], steps
    )  # canonical update: the old sweep
    assert forged.epsilon.notna().all()
    write_table(path, forged)
    with pytest.raises(DPLabError, match="no pld values"):
        figure("accountants_vs_pld").table(
            {"sweep": str(path), "summary": str(runs / "projected" / "summary.json")},
            {"sweep": "s"},
        )


def test_hidden_state_gain_drops_a_curve_the_run_may_not_claim(runs, tmp_path):
    """A summary/metrics pair edited to carry a pld curve for the projected run: the table shows
    pld as refused (with the reason), not as a curve."""
    summary = _summary(runs, "projected")
    metrics = pd.read_csv(runs / "projected" / "metrics.csv")
    summary["epsilon"]["pld"] = 1.0
    summary["epsilon_covers"]["pld"] = "every iterate"
    del summary["excluded_accountants"]["pld"]
    metrics["epsilon_pld"] = 1.0
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    table = figure("hidden_state_gain").table(
        {"summaries": [str(tmp_path / "summary.json")], "metrics": [str(tmp_path / "metrics.csv")]},
        {"runs": ["projected"], "skip": []},
    )
    pld = table[table.accountant == "pld"]
    assert (
        len(pld) == 1 and pld.epsilon.isna().all() and "realized batch size" in pld.reason.iloc[0]
    )
    assert table[table.accountant == "asoodeh_projected"].epsilon.notna().all()


def test_runs_without_a_setting_and_old_summaries():
    """dp_mf (correlated noise) and non-private runs claim no DP-SGD accountant; the MF accountant
    only for correlated noise; a summary without the update record cannot be swept."""
    table = sweep(None, 1e-6, ["rdp", "pld"], np.array([1, 5]), Update(noise="correlated"))
    assert table.epsilon.isna().all() and (table.reason == OTHER_NOISE["independent"]).all()
    assert refusal("mf", None, Update(noise="correlated")) is None
    assert "dp_mf" in refusal("mf", None, Update())
    assert "non-private" in refusal("rdp", None, Update(noise="none"))
    with pytest.raises(DPLabError, match="update"):
        from_summary(
            dataclasses.replace(
                RunSummary.of(summary_json({"method": "dp_sgd", "noise_multiplier": 1.0})),
                update={"noise": "independent", "bogus": 1},
            )
        )


def test_old_summary_is_refused_by_the_sweep_command(runs, tmp_path, capsys):
    summary = _summary(runs, "dp_sgd")
    del summary["update"]
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "out.csv"
    assert (
        main(
            [
                "sweep",
                "--summary",
                str(tmp_path / "summary.json"),
                "--accountants",
                "rdp",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "run summary has no key 'update'" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    "name, sampling",
    [
        ("shuffle_lower", "shuffle"),
        ("balls_in_bins_lower", "balls_in_bins"),
        ("as_if_poisson", "shuffle"),
    ],
)
def test_a_run_never_claims_a_lower_bound_or_a_comparison(name, sampling):
    """Only upper bounds are guarantees: a shuffled run whose setting every epoch accountant
    accepts still may not claim a lower bound or the Poisson comparison as its ε."""
    from dplab.accounting import Setting

    setting = Setting(
        noise_multiplier=2.0,
        steps=44,
        sampling=sampling,
        neighbouring="replace_one",
        dataset_size=1437,
        batch_size=64,
    )
    accounting.get(name).check(setting)  # the setting is inside the accountant's own assumptions
    why = refusal(name, setting, Update())
    assert why is not None and "not a guarantee" in why
    assert (
        exclusion(name, setting, Update()) is None
    )  # reported beside the claims, under its own key
    assert key(name) == f"epsilon_{accounting.get(name).bound}"
    assert refusal("fixed_batches", setting, Update()) is None


@pytest.mark.parametrize(
    "sampling, accountant, filtered",
    [
        ("balls_in_bins", "balls_in_bins", False),
        ("balls_in_bins", "fixed_batches", False),
        ("full_batch", "rdp", True),
        ("full_batch", "pld", True),
        ("shuffle", "fixed_batches", True),
    ],
)
def test_the_realized_batch_size_is_no_claim_wherever_the_batch_size_varies(
    sampling, accountant, filtered
):
    """Dividing the clipped sum by the realized |B| while the noise is divided by b puts one record
    in every other record's term and scales the sum up against the noise when |B| < b.  Only
    Poisson batches were refused: balls-in-bins batches (a run at b = 64 had |B| from 37 to 97)
    and the Rényi filter's shrinking batches (full-batch dp_gd at σ = 10: |B| from 1437 to 141,
    an effective σ near 1) kept their composition claims.  Fixed-size batches still may."""
    from dplab.accounting import Setting

    setting = Setting(
        noise_multiplier=2.0,
        steps=44,
        sampling=sampling,
        neighbouring="replace_one" if sampling == "shuffle" else "add_remove",
        dataset_size=1437,
        batch_size=64 if sampling != "full_batch" else None,
        sampling_rate=1.0 if sampling == "full_batch" else None,
    )
    realized = Update(normalize="realized", filtered=filtered)
    why = refusal(accountant, setting, realized)
    assert why is not None and "realized batch size" in why
    assert refusal(accountant, setting, dataclasses.replace(realized, normalize="expected")) is None
    if filtered:  # without the filter the batch is n (full batch) or b (shuffle): no objection
        assert refusal(accountant, setting, dataclasses.replace(realized, filtered=False)) is None
