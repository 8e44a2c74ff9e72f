"""Figure mf_structure (004 §4.3) and the factorizations the pipeline saves once (results/mf)."""

import json

import numpy as np
import pytest
import yaml

from conftest import ROOT
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings
from dplab import entries, jobs, layout
from dplab.training.methods import run_factorization
from dplab.cli import main
from dplab.config import check_config
from dplab.schemas import validate
from dplab.errors import DPLabError
from dplab.figures import mf_structure
from dplab.mf import factorizations
from dplab.mf import saved as mf_saved
from dplab.mf.workload import prefix_sum
from dplab.training.methods import dp_mf

T = 24


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mf")
    paths = []
    for fact in (factorizations.banded(prefix_sum(T), 4), factorizations.identity(prefix_sum(T))):
        paths.append(str(folder / f"{fact.strategy}.npz"))
        mf_saved.save(fact, paths[-1])
    return paths


def test_table_values(saved):
    table = mf_structure.table({"factorizations": saved}, {"bins": 20})
    heat = table[table.panel == "heatmap"]
    assert len(heat) == 2 * T * (T + 1) // 2  # lower triangles of B and C
    dense = {}
    for name in ("B", "C"):
        cells = heat[heat.matrix == name]
        M = np.zeros((T, T))
        M[cells.i.astype(int), cells.j.astype(int)] = cells.value
        dense[name] = M
    np.testing.assert_allclose(dense["B"] @ dense["C"], prefix_sum(T), atol=1e-10)  # B·C = A
    np.testing.assert_allclose(np.linalg.norm(dense["C"], axis=0), 1.0, atol=1e-12)
    hist = table[table.panel == "histogram"]
    assert hist.groupby("factorization")["count"].sum().to_dict() == {
        "banded-4": T * (T + 1) // 2,
        "identity": T * (T + 1) // 2,
    }
    # C = I: C⁻¹ has T ones and T(T−1)/2 zeros
    ident = hist[hist.factorization == "identity"]
    assert ident[(ident.bin_low <= 1) & (ident.bin_high >= 1)]["count"].sum() == T
    norms = table[table.panel == "row_norm"]
    sqrt_t = np.sqrt(np.arange(1, T + 1))  # ‖A[t,:]‖ = √(t+1), and B = A for C = I
    np.testing.assert_allclose(norms[norms.matrix == "A"].value, sqrt_t, rtol=1e-12)
    np.testing.assert_allclose(
        norms[(norms.matrix == "B") & (norms.factorization == "identity")].value, sqrt_t, rtol=1e-12
    )
    banded = norms[(norms.matrix == "B") & (norms.factorization == "banded-4")].value.to_numpy()
    # mean squared row norm = mean_error (sensitivity 1), below DP-SGD's (T+1)/2:
    # the noise partly cancels
    assert np.mean(banded**2) == pytest.approx(
        factorizations.banded(prefix_sum(T), 4).errors()["mean_error"], rel=1e-9
    )
    assert np.mean(banded**2) < (T + 1) / 2
    mf_structure.draw(table)


def _config():
    config = validate(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    check_config(config)
    return config


def test_default_config_saves_each_factorization_once():
    config = _config()
    plan = jobs.plan(config)
    specs = {key: job.spec for key, job in plan.of("factorization").items()}
    dense = {
        "buffers": None,
        "objective": None,
        "min_separation": None,
    }  # parts of banded_toeplitz and blt only
    assert specs == {
        "banded_T200_m16": {"strategy": "banded", "steps": 200, "bands": 16, **dense},
        "optimal_T200": {"strategy": "optimal", "steps": 200, "bands": None, **dense},
        # try4_dp_mf_blt: 200 fixed batches over T = 200 steps, single participation (no _s suffix)
        "blt_T200_k4_mean": {
            "strategy": "blt",
            "steps": 200,
            "bands": None,
            "buffers": 4,
            "objective": "mean",
            "min_separation": None,
        },
        # mf_regime's 5 epochs of 32 steps (3200 records, batch 100): banded Toeplitz (cyclic
        # Poisson, amplified) and a BLT over 32 min-separated batches
        "banded_toeplitz_T160_m4_mean": {
            "strategy": "banded_toeplitz",
            "steps": 160,
            "bands": 4,
            "buffers": None,
            "objective": "mean",
            "min_separation": None,
        },
        "blt_T160_k4_mean_s32": {
            "strategy": "blt",
            "steps": 160,
            "bands": None,
            "buffers": 4,
            "objective": "mean",
            "min_separation": 32,
        },
    }
    assert mf_structure.inputs(config, config["figures"]["mf_structure"]) == {
        "factorizations": ["results/mf/banded_T200_m16.npz", "results/mf/optimal_T200.npz"]
    }
    runs = entries.grid_runs(config, "mf_vs_dpsgd")
    keys = {item["variant"]: run_factorization(item["run"]) for item in runs.values()}
    assert keys == {"dp_mf": "banded_T200_m16", "dp_sgd": None}
    assert all(layout.mf_file(k) in plan.targets for k in specs)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"grid": "mf_vs_dpsgd", "strategy": "sqrt"}, "not both"),
        ({"strategy": "banded", "steps": 10}, "bands"),
        ({"steps": 10}, "strategy"),
        ({"strategy": "sqrt", "steps": 10, "compare": ["banded"]}, "compare"),
        ({"grid": "nope"}, "unknown grid"),
    ],
)
def test_bad_params_name_the_key(params, match):
    with pytest.raises(DPLabError, match=match):
        mf_structure.check(_config(), params)


def test_mf_out_writes_what_train_loads(tmp_path, capsys):
    run = RunSettings.of(
        resolve_run(
            {
                "method": "dp_mf",
                "strategy": "banded",
                "steps": 12,
                "bands": 3,
                "sampling": "min_separation",
                "noise_multiplier": 1.0,
            }
        )
    )
    with pytest.raises(DPLabError, match="dplab mf --strategy banded --steps 12 --bands 3 --out"):
        dp_mf.load_factorization(run, tmp_path)
    path = tmp_path / f"{layout.cache_key('banded', 12, 3)}.npz"
    assert (
        main(["mf", "--strategy", "banded", "--steps", "12", "--bands", "3", "--out", str(path)])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["out"] == str(path)
    np.testing.assert_array_equal(
        dp_mf.load_factorization(run, tmp_path).encoder,
        factorizations.banded(prefix_sum(12), 3).encoder,
    )


def test_mf_config_saves_every_factorization(tmp_path, capsys):
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = {
        "datasets": base["datasets"],
        "runs": {"sgd": base["runs"]["nonprivate"]},
        "figures": {
            "mf_structure": {"strategy": "banded", "steps": 10, "bands": 2, "compare": ["sqrt"]}
        },
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    specs = jobs.plan(validate(config)).of(
        "factorization"
    )  # one `dplab mf` job each (rule factorization)
    for key, job in specs.items():
        assert (
            main(["mf", *job.params["args"].split(), "--out", str(tmp_path / "mf" / f"{key}.npz")])
            == 0
        )
    assert sorted(p.name for p in (tmp_path / "mf").iterdir()) == [
        "banded_T10_m2.npz",
        "sqrt_T10.npz",
    ]
