"""Figure mf_scale: identity, banded Toeplitz, BLT and the dense optimum vs T, single and
multiple participation, with the optimization time."""

from __future__ import annotations

import numpy as np
import pytest

from dplab.errors import DPLabError
from dplab.figures import mf_scale
from figure_params import default_params

SMALL = {
    "steps": [24, 60],
    "bands": 4,
    "buffers": 2,
    "objective": "max",
    "participations": 3,
    "dense_max_steps": 24,
}


@pytest.fixture(scope="module")
def scale_table():
    return mf_scale.table({}, {**default_params("mf_scale"), **SMALL})


def test_defaults_stay_small():
    """The default run's grid: T up to 10⁴ and the dense optimum only up to 300 (seconds of CPU)."""
    params = default_params("mf_scale")
    assert max(params["steps"]) == 10_000 and params["dense_max_steps"] == 300


def test_rows_and_identity_closed_form(scale_table):
    """Identity (DP-SGD): sens² = k, row t's error (t+1)·k, so mean k·(T+1)/2 and max
    k·T; every row present."""
    ident = scale_table[scale_table.strategy == "identity"]
    np.testing.assert_allclose(
        ident.mean_error, ident.participations * (ident.steps + 1) / 2, rtol=1e-12
    )
    np.testing.assert_allclose(ident.max_error, ident.participations * ident.steps, rtol=1e-12)
    counts = scale_table.groupby(["participation", "strategy"]).size().to_dict()
    assert counts == {
        ("single", "identity"): 2,
        ("single", "banded_toeplitz"): 2,
        ("single", "blt"): 2,
        ("single", "optimal"): 1,
        ("multiple", "identity"): 2,
        ("multiple", "banded_toeplitz"): 2,
        ("multiple", "blt"): 2,
    }
    multi = scale_table[scale_table.participation == "multiple"]
    assert (multi.min_separation == multi.steps // 3).all() and (multi.participations == 3).all()


def test_optimized_strategies_beat_identity_and_the_dense_optimum_beats_them_on_the_mean(
    scale_table,
):
    """Banded Toeplitz and BLT minimize the max error: below identity's (it is a feasible C
    for both); the dense optimum of the mean error has the least mean error of all at
    single participation."""
    for _, g in scale_table.groupby(["participation", "steps"]):
        g = g.set_index("strategy")
        for strategy in ("banded_toeplitz", "blt"):
            assert g.max_error[strategy] < g.max_error["identity"]
        if "optimal" in g.index:
            assert (g.mean_error["optimal"] <= g.mean_error.drop("optimal") * (1 + 1e-6)).all()
    assert (scale_table.optimization_seconds >= 0).all()


def test_draw(scale_table):
    fig = mf_scale.draw(scale_table)
    assert len(fig.axes) == 4


@pytest.mark.parametrize(
    "params,key",
    [
        ({"steps": [24, 24]}, "steps"),
        ({"bands": 25}, "bands"),
        ({"buffers": 13}, "buffers"),
        ({"participations": 30}, "participations"),
    ],
)
def test_check_refuses(params, key):
    with pytest.raises(DPLabError, match=key):
        mf_scale.check({}, {**default_params("mf_scale"), **SMALL, **params})
