"""Figure mf_regime and its claims row: the learning rate chosen on validation data, each ε its
accountant's, the selection's ε, and the 004 §4.3 multi-epoch verdict computed from the table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import ROOT
from dplab.accounting import selection
from dplab.accounting.gaussian import gaussian_epsilon
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.figures import claims, figure
from dplab.training import data, loop
from dplab.training.methods.dp_mf import build_factorization
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings
from dplab.training.summary import RunSummary

LRS, SEEDS, DELTA = (0.05, 1.0), (0, 1), 1e-5


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """DP-SGD (ε from rdp, σ = 1) and DP-MF (BLT, min_separation: the Gaussian mechanism, σ = 2)
    on synthetic data with a validation split, 2 lrs × 2 seeds, 8 steps of batch 10 over 40
    records (2 epochs); σ given, not calibrated, and one BLT factorization for all its runs
    (speed)."""
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 60, "test_size": 30, "dim": 5}, "s"
    )
    train, test, info = data.prepare(cfg, "s")
    fit, held = slice(0, 40), slice(40, 60)
    info = {**info, "train_size": 40, "validation_size": 20}
    ds = data.Dataset(
        *(torch.from_numpy(a) for a in (train["x"][fit], train["y"][fit], test["x"], test["y"])),
        info,
        torch.from_numpy(train["x"][held]),
        torch.from_numpy(train["y"][held]),
    )
    base = {
        "dataset": "s",
        "model": "logreg",
        "steps": 8,
        "batch_size": 10,
        "clip": 1.0,
        "delta": DELTA,
        "log_every": 8,
    }
    variants = {
        "sgd": {
            "method": "dp_sgd",
            "accountant": "rdp",
            "accountants": ["rdp"],
            "noise_multiplier": 1.0,
        },
        "blt": {
            "method": "dp_mf",
            "strategy": "blt",
            "buffers": 2,
            "sampling": "min_separation",
            "min_separation": 4,
            "noise_multiplier": 2.0,
        },
    }
    blt = build_factorization(RunSettings.of(resolve_run({**base, **variants["blt"]})))
    folder, paths = tmp_path_factory.mktemp("grid"), []
    for variant, keys in variants.items():
        for lr in LRS:
            for seed in SEEDS:
                name = f"s/logreg/{variant}/sigma/lr{lr:g}/seed{seed}"
                loop.train(
                    RunSettings.of(
                        resolve_run({**base, **keys, "lr": lr, "seed": seed, "name": name})
                    ),
                    ds,
                    folder / name,
                    factorization=blt if variant == "blt" else None,
                )
                paths.append(str(folder / name / "summary.json"))
    return paths, figure("mf_regime").table({"summaries": paths}, {"grid": "g"})


def test_the_chosen_lr_is_the_validation_argmax_and_its_test_accuracy_is_reported(grid):
    paths, table = grid
    summaries = [RunSummary.read(p) for p in paths]
    assert all(s.validation["size"] == 20 for s in summaries)
    for strategy in ("dp_sgd", "blt"):
        mine = [s for s in summaries if (s.settings.method_key("strategy") or "dp_sgd") == strategy]
        val = {
            lr: np.mean([s.validation["accuracy"] for s in mine if s.settings.lr == lr])
            for lr in LRS
        }
        test = {lr: [s.final.test_accuracy for s in mine if s.settings.lr == lr] for lr in LRS}
        best = max(LRS, key=lambda lr: (val[lr], -LRS.index(lr)))  # the first of a tie
        rows = table[table.strategy == strategy]
        chosen = rows[rows.chosen]
        assert len(rows) == 2 and len(chosen) == 1 and chosen.lr.iloc[0] == best
        assert chosen.validation_accuracy_mean.iloc[0] == pytest.approx(val[best])
        assert chosen.test_accuracy_mean.iloc[0] == pytest.approx(np.mean(test[best]))
        assert chosen.test_accuracy_sd.iloc[0] == pytest.approx(np.std(test[best], ddof=1))
        assert chosen.epochs.iloc[0] == 2.0 and chosen.seeds.iloc[0] == 2


def test_each_epsilon_is_its_accountants_and_the_selection_costs_more(grid):
    paths, table = grid
    sgd = table[table.strategy == "dp_sgd"].iloc[0]
    setting = Setting(noise_multiplier=1.0, sampling_rate=0.25, steps=8, sampling="poisson")
    assert sgd.accountant == "rdp" and sgd.sensitivity == 1.0
    assert sgd.epsilon == pytest.approx(get("rdp").epsilon(setting, DELTA), rel=1e-9)
    blt = table[table.strategy == "blt"].iloc[0]
    # min_separation: one Gaussian mechanism of noise σ / sens(C; k = 2, b = 4), its exact ε
    assert blt.accountant == "mf" and blt.sensitivity > 1.0
    assert blt.epsilon == pytest.approx(
        gaussian_epsilon(DELTA, blt.sensitivity / blt.noise_multiplier), rel=1e-6
    )
    assert blt.noise_multiplier == 2.0 and blt.risk_note.startswith(
        "no risk: correlated noise"
    )  # beside its ε
    # choosing among 2 lrs of 2 seeds each: Papernot & Steinke over the seeds' composed RDP curve
    orders, rdp = get("rdp").rdp_curve(setting)
    expected = selection.epsilon([(orders, 2 * rdp)] * 2, DELTA, 2, 1.0)
    rows = table[table.strategy == "dp_sgd"]
    assert rows.selection_epsilon.to_numpy() == pytest.approx([expected] * 2, rel=1e-9)
    assert (table.selection_epsilon > table.epsilon).all()
    # what the grid ran: 2 lrs × 2 seeds × 8 steps on the same records, 32 steps composed
    assert rows.grid_epsilon.to_numpy() == pytest.approx(
        [get("rdp").epsilon(setting.replace(steps=32), DELTA)] * 2, rel=1e-12
    )
    gaussian = Setting(
        noise_multiplier=blt.noise_multiplier / blt.sensitivity, sampling_rate=1.0, steps=1
    )
    orders, rdp = get("rdp").rdp_curve(gaussian)
    assert blt.selection_epsilon == pytest.approx(
        selection.epsilon([(orders, 2 * rdp)] * 2, DELTA, 2, 1.0), rel=1e-9
    )
    # 4 Gaussian mechanisms of multiplier s compose to one of s/2 (RDP α/(2s²) adds)
    half = gaussian.replace(noise_multiplier=gaussian.noise_multiplier / 2)
    assert blt.grid_epsilon == pytest.approx(get("rdp").epsilon(half, DELTA), rel=1e-12)
    assert (table.grid_epsilon > table.epsilon).all()
    assert table.selection_note.str.contains("grid_epsilon, this grid's runs composed").all()


def test_a_learning_rate_without_an_rdp_curve_leaves_the_cells_choice_unpriced():
    """DP-SGD with Poisson sampling and replace_one (pld claims it) has no RDP curve: the cell's
    grid and selection ε are empty and the note says why, rather than stopping the table."""
    from dplab.figures import mf_regime

    setting = Setting(noise_multiplier=1.0, sampling_rate=0.25, steps=8, sampling="poisson")
    cell = pd.DataFrame(
        {
            "lr": [0.1, 0.5],
            "seeds": [2, 2],
            "delta": [DELTA] * 2,
            "rdp_setting": [setting, setting.replace(neighbouring="replace_one")],
        }
    )
    out = mf_regime._selection(cell, {})
    assert out.grid_epsilon.isna().all() and out.selection_epsilon.isna().all()
    assert "no RDP curve for lr 0.5" in out.selection_note.iloc[0]
    assert "poisson with replace_one" in out.selection_note.iloc[0]
    both = mf_regime._selection(cell.iloc[:1], {})
    assert both.grid_epsilon.iloc[0] == pytest.approx(
        get("rdp").epsilon(setting.replace(steps=16), DELTA), rel=1e-12
    )


def _table(gaps: dict[tuple[float, float], float]) -> pd.DataFrame:
    """A minimal mf_regime table: DP-SGD at 0.6 and one MF strategy at 0.6 + gap per (epochs, ε)."""
    rows = []
    for (epochs, eps), gap in gaps.items():
        rows.append(
            {
                "strategy": "dp_sgd",
                "epochs": epochs,
                "target_epsilon": eps,
                "chosen": True,
                "test_gap_to_dp_sgd": 0.0,
            }
        )
        rows.append(
            {
                "strategy": "blt",
                "epochs": epochs,
                "target_epsilon": eps,
                "chosen": True,
                "test_gap_to_dp_sgd": gap,
            }
        )
        rows.append(
            {
                "strategy": "blt",
                "epochs": epochs,
                "target_epsilon": eps,
                "chosen": False,
                "test_gap_to_dp_sgd": float("nan"),
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "gaps, ours, verdict",
    [
        (
            {(1.0, 1.0): -0.30, (5.0, 1.0): -0.04, (5.0, 8.0): 0.10},
            -0.04,
            claims.HOLDS,
        ),  # one epoch is not the claim's
        ({(5.0, 1.0): -0.12, (5.0, 8.0): 0.02, (20.0, 8.0): 0.05}, -0.12, claims.DIFFERS),
    ],
)
def test_the_multi_epoch_claim_follows_the_figures_table(gaps, ours, verdict):
    res = claims.Results.__new__(claims.Results)
    res.tables = {"mf_regime": ("results/tables/mf_regime.csv", _table(gaps))}
    (row,) = claims.mf_regime_claims(res)
    assert row.ours == pytest.approx(ours)
    assert (
        claims.verdict(
            row.source_value, row.ours, row.test, row.tolerance, row.relative, row.why_not
        )
        == verdict
    )
    res.tables = {}
    (row,) = claims.mf_regime_claims(res)
    assert (
        claims.verdict(row.source_value, row.ours, row.test, row.tolerance) == claims.NOT_CHECKABLE
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["grids"]["mf_regime"].pop("lrs"), "needs lrs"),
        (
            lambda c: c["datasets"]["mnist5000_val"].pop("validation_fraction"),
            "no validation split",
        ),
        (
            lambda c: c["grids"]["mf_regime"]["variants"].pop("dp_sgd_5ep"),
            "must have dp_sgd and dp_mf",
        ),
    ],
)
def test_the_figure_refuses_a_grid_it_cannot_choose_on_validation(change, message):
    from dplab.config import read_config
    from dplab.errors import DPLabError
    from dplab.figures import mf_regime

    config = read_config(ROOT / "config" / "config.yaml")
    change(config)
    with pytest.raises(DPLabError, match=f"figures.mf_regime.grid.*{message}"):
        mf_regime.check(config, config["figures"]["mf_regime"])


def test_a_crossing_is_where_the_drawn_segments_meet_in_log_epsilon():
    """The gap −0.135 at ε = 1 and +0.017 at ε = 8 (drawn on a log ε axis) meets zero at
    ε = 8^(0.135/0.152) ≈ 6.33, not at the bracket's geometric middle √8 ≈ 2.83."""
    from dplab.figures import mf_regime

    rows = [
        {"strategy": s, "variant": s, "epochs": 5.0, "target_epsilon": e, "test_gap_to_dp_sgd": g}
        for s, e, g in [
            ("dp_sgd", 1.0, 0.0),
            ("dp_sgd", 8.0, 0.0),
            ("blt", 1.0, -0.135),
            ("blt", 8.0, 0.017),
            ("banded", 1.0, 0.01),
            ("banded", 8.0, 0.02),
        ]
    ]
    ((epochs, variant, lo, hi, at),) = mf_regime.crossings(pd.DataFrame(rows))
    assert (epochs, variant, lo, hi) == (5.0, "blt", 1.0, 8.0)
    assert at == pytest.approx(8 ** (0.135 / 0.152), rel=1e-12)
