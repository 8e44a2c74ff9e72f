"""Individual ε (dplab.accounting.individual; runs with individual_epsilon: true)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import synthetic_data
from dplab.accounting import Setting, individual
from dplab.accounting.registry import get
from dplab.errors import DPLabError
from dplab.training import loop
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

POISSON = Setting(
    noise_multiplier=1.1,
    steps=50,
    sampling="poisson",
    neighbouring="add_remove",
    dataset_size=1000,
    batch_size=20,
)
L = individual.LEVELS


def counts_of(steps_at_level: dict[int, int]) -> np.ndarray:
    row = np.zeros((1, L + 1))
    for level, steps in steps_at_level.items():
        row[0, level] = steps
    return row


def test_sensitivity_one_everywhere_is_the_runs_rdp_epsilon_and_zero_is_zero():
    """A record at s = 1 at every step has exactly rdp's ε; one at s = 0 has
    0; one in between less."""
    worst = float(get("rdp").epsilon_curve(POISSON, 1e-5, [50])[0])
    eps = individual.epsilons(
        POISSON,
        np.vstack([counts_of({L: 50}), counts_of({0: 50}), counts_of({L: 25, L // 2: 25})]),
        1e-5,
    )
    assert eps[0] == worst == individual.worst_case(POISSON, 1e-5)
    assert eps[1] == 0.0
    assert 0 < eps[2] < worst


@pytest.mark.parametrize("s", [0.3, 0.77])
def test_rounding_up_the_sensitivity_bounds_the_exact_one_from_above(s):
    """s off the grid: the level's ε is at least the ε of the exact per-step σ/s (RDP decreases in
    σ), and within the next level's."""
    level = int(np.ceil(s * L))
    exact = float(
        get("rdp").epsilon_curve(POISSON.replace(noise_multiplier=1.1 / s), 1e-5, [50])[0]
    )
    rounded = individual.epsilons(POISSON, counts_of({level: 50}), 1e-5)[0]
    assert (
        exact
        <= rounded
        <= float(
            get("rdp").epsilon_curve(
                POISSON.replace(noise_multiplier=1.1 * L / (level + 1)), 1e-5, [50]
            )[0]
        )
    )


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return synthetic_data(tmp_path_factory.mktemp("synth"), 200, 50)


def run(synth, tmp_path, hook=None, **changes) -> tuple[pd.DataFrame, dict]:
    raw = {
        "method": "dp_sgd",
        "model": "logreg",
        "dataset": "synthetic",
        "steps": 10,
        "batch_size": 20,
        "lr": 0.5,
        "clip": 1.0,
        "noise_multiplier": 1.0,
        "delta": 1e-5,
        "accountants": ["rdp"],
        "log_every": 10,
        "individual_epsilon": True,
        **changes,
    }
    cfg = resolve_run({k: v for k, v in raw.items() if v is not None})
    loop.train(RunSettings.of(cfg), synth, tmp_path, hook=hook)
    return pd.read_csv(tmp_path / "individual_epsilon.csv"), json.loads(
        (tmp_path / "summary.json").read_text()
    )


def test_a_runs_individual_epsilons_never_exceed_its_worst_case(synth, tmp_path):
    """Every record of a DP-SGD run: individual ε ≤ the run's rdp ε, one row per
    record with its class."""
    table, summary = run(synth, tmp_path)
    assert list(table.columns) == list(loop.INDIVIDUAL_COLUMNS)
    assert table["index"].tolist() == list(range(200))
    assert table["class"].tolist() == synth.y_train.tolist()
    worst = summary["epsilon"]["rdp"]
    assert summary["individual_privacy"]["worst_case_epsilon"] == worst
    assert (table.individual_epsilon <= worst).all() and (table.individual_epsilon > 0).all()
    assert table.individual_epsilon.min() < worst  # some record's norm fell below C at some step


def test_records_clipped_at_every_step_get_the_worst_case(synth, tmp_path):
    """C far below every gradient norm: every record's sensitivity is 1 at every step."""
    table, summary = run(synth, tmp_path, clip=1e-4)
    assert (table.individual_epsilon == summary["epsilon"]["rdp"]).all()


def test_one_full_batch_step_matches_the_closed_form_norms(synth, tmp_path):
    """DP-GD, T = 1 from θ = 0 (logreg): record i's norm is √((1 − 1/K)² +
    (K − 1)/K²)·√(‖x_i‖² + 1), so its ε is that of one Gaussian step at σ/s_i, s_i = min(norm,
    C)/C rounded up to the grid."""
    table, summary = run(
        synth, tmp_path, method="dp_gd", steps=1, log_every=1, clip=2.0, batch_size=None
    )
    k = 3
    x = synth.x_train.numpy().reshape(200, -1)
    norms = np.sqrt((1 - 1 / k) ** 2 + (k - 1) / k**2) * np.sqrt((x**2).sum(1) + 1)
    levels = np.ceil(np.minimum(norms, 2.0) / 2.0 * L)
    setting = Setting(
        noise_multiplier=1.0,
        steps=1,
        sampling="full_batch",
        neighbouring="add_remove",
        dataset_size=200,
    )
    for i in (0, 1, 2):
        expected = float(
            get("rdp").epsilon_curve(setting.replace(noise_multiplier=L / levels[i]), 1e-5, [1])[0]
        )
        assert table.individual_epsilon[i] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "changes, text",
    [
        ({"neighbouring": "replace_one", "accountants": ["pld"]}, "got poisson + replace_one"),
        (
            {"method": "sgd", "noise_multiplier": None, "clip": None, "accountants": None},
            "got method sgd",
        ),
    ],
)
def test_individual_epsilon_outside_its_assumptions_is_refused(changes, text):
    raw = {
        "method": "dp_sgd",
        "model": "logreg",
        "dataset": "synthetic",
        "steps": 20,
        "batch_size": 20,
        "noise_multiplier": 1.0,
        "accountants": ["rdp"],
        "individual_epsilon": True,
        **changes,
    }
    with pytest.raises(DPLabError, match=f"individual_epsilon.*{re.escape(text)}"):
        resolve_run({k: v for k, v in raw.items() if v is not None})


def test_a_resumed_run_writes_the_same_individual_epsilons(synth, tmp_path):
    """Crash after step 7 (checkpoint at step 4), resume: the per-record level counts travel in the
    checkpoint, so individual_epsilon.csv is byte-identical to the uninterrupted run's."""

    def crash(step):
        if step == 7:
            raise KeyboardInterrupt

    cfg = {"checkpoint_every": 4, "device": "cpu", "noise_multiplier": 3.0}
    run(synth, tmp_path / "whole", **cfg)
    with pytest.raises(KeyboardInterrupt):
        run(synth, tmp_path / "resumed", hook=crash, **cfg)
    run(synth, tmp_path / "resumed", **cfg)
    whole, resumed = (
        (tmp_path / d / "individual_epsilon.csv").read_bytes() for d in ("whole", "resumed")
    )
    assert whole == resumed


def test_the_renyi_filter_keeps_every_record_within_its_budget(synth, tmp_path):
    """individual_budget ε_B at order α: no record's individual ε exceeds ε_B (its RDP at α stays
    within ε_B − ln(1/δ)/(α − 1)), where the unfiltered run's records go past it, and every record
    still takes steps (B holds ~16 steps at full sensitivity); a budget no record reaches changes
    nothing (same bytes).  One σ for the three runs: the level RDPs are computed once."""
    keys = {"noise_multiplier": 1.5, "steps": 40}
    plain, _ = run(synth, tmp_path / "plain", **keys)
    budget = float(np.quantile(plain.individual_epsilon, 0.5))
    filtered, summary = run(
        synth, tmp_path / "filtered", individual_budget=budget, individual_order=8, **keys
    )
    assert (plain.individual_epsilon > budget).any()
    assert (filtered.individual_epsilon <= budget).all()
    record = summary["individual_privacy"]["filter"]
    assert record["rdp_budget"] == pytest.approx(budget - np.log(1e5) / 7)
    one_step = Setting(noise_multiplier=1.5, sampling_rate=0.1, steps=1, sampling="poisson")
    orders, rdp = get("rdp").rdp_curve(one_step)
    assert record["full_step_rdp"] == pytest.approx(rdp[list(orders).index(8)], rel=1e-12)
    assert record["full_step_rdp"] * 10 < record["rdp_budget"]
    assert record["records_left_out_of_every_step"] == 0
    run(synth, tmp_path / "loose", individual_budget=1e3, individual_order=8, **keys)
    assert (tmp_path / "loose" / "model.pt").read_bytes() == (
        tmp_path / "plain" / "model.pt"
    ).read_bytes()


def test_a_filter_budget_below_one_step_says_so_and_counts_the_records_left_out(
    synth, tmp_path, caplog
):
    """B = 0.38 − ln(1e5)/31 ≈ 0.0086 of RDP at order 32, below what one step costs any record
    at a fifth of the clip norm: every record is left out of every step (a valid run, trained on
    noise alone), which a warning and summary.json's filter record say."""
    import logging

    with caplog.at_level(logging.WARNING, logger="dplab"):
        table, summary = run(
            synth, tmp_path, noise_multiplier=0.8, individual_budget=0.38, individual_order=32
        )
    assert (table.individual_epsilon == 0).all()
    assert summary["individual_privacy"]["filter"]["records_left_out_of_every_step"] == 200
    [line] = [r.getMessage() for r in caplog.records if "individual_budget" in r.getMessage()]
    assert "never takes a step" in line


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"individual_budget": 1.0, "individual_epsilon": False}, "individual_budget"),
        ({"individual_budget": 1.0, "individual_order": 33.5}, "individual_order"),
        (
            {"individual_budget": 0.3, "individual_order": 32},
            "individual_budget",
        ),  # ln(1e5)/31 = 0.37 > 0.3
    ],
)
def test_a_filter_outside_its_range_is_refused(changes, key):
    raw = {
        "method": "dp_sgd",
        "model": "logreg",
        "dataset": "synthetic",
        "steps": 20,
        "batch_size": 20,
        "noise_multiplier": 1.0,
        "accountants": ["rdp"],
        "individual_epsilon": True,
        **changes,
    }
    with pytest.raises(DPLabError, match=f"^{key}: "):
        resolve_run(raw)


def test_levels_charge_a_norm_at_or_above_the_clip_and_a_nan_the_top_level():
    """⌈64·min(‖g‖, C)/C⌉: 0 → 0, C/64 → 1, C and ∞ → 64; NaN → 64 (it was cast to level 0)."""
    import torch

    from dplab.accounting.individual import LEVELS, levels

    norms = torch.tensor([0.0, 2.0 / 64, 1.0, 2.0, 3.0, float("inf"), float("nan")])
    assert levels(norms, 2.0).tolist() == [0, 1, 32, LEVELS, LEVELS, LEVELS, LEVELS]


def test_a_filtered_run_claims_no_hidden_state_bound(synth, tmp_path):
    """The Rényi filter drops records from the steps by their history, so the steps descend no one
    fixed λ-strongly convex loss: langevin (002 Cor. 1), claimed by the same run unfiltered, is
    refused; rdp, whose steps each still have sensitivity C, is the same."""
    keys = dict(
        method="noisy_gd",
        batch_size=None,
        steps=5,
        lr=0.9,
        l2=0.05,
        diameter=6.0,
        clip=2.15,
        noise_multiplier=8.0,
        accountants=["rdp", "langevin"],
        log_every=5,
    )
    _, plain = run(synth, tmp_path / "plain", **keys)
    _, filtered = run(synth, tmp_path / "filtered", individual_budget=50.0, **keys)
    assert set(plain["epsilon"]) == {"rdp", "langevin"} and "filtered" not in plain["update"]
    assert set(filtered["epsilon"]) == {"rdp"} and filtered["update"]["filtered"] is True
    assert "Rényi filter" in filtered["excluded_accountants"]["langevin"]
    assert filtered["epsilon"]["rdp"] == plain["epsilon"]["rdp"]
