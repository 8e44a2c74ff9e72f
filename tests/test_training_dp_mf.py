"""Method dp_mf: end to end on tiny data, σ calibration, the sampler the accounting sees, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import summary_json
from dplab.training.settings import RunSettings
from dplab.accounting import Setting, get
from dplab import layout
from dplab.errors import DPLabError
from dplab.mf import accounting as mf_accounting
from dplab.mf import factorizations
from dplab.mf.workload import prefix_sum
from dplab.training import checkpoint, data, loop
from dplab.training.methods import dp_mf
from dplab.training.resolve import resolve_run


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    cfg = data.resolve_dataset({"kind": "synthetic", "train_size": 60, "test_size": 20, "dim": 5, "classes": 3}, "s")
    out = tmp_path_factory.mktemp("synth")
    data.write(out, *data.prepare(cfg, "s"))
    return data.load(out)


def _cfg(**kw):
    base = {"method": "dp_mf", "dataset": "s", "strategy": "banded", "bands": 3, "steps": 12, "batch_size": 5,
            "lr": 0.5, "clip": 1.0, "target_epsilon": 2.0, "delta": 1e-5, "log_every": 4, "checkpoint_every": 0,
            "device": "cpu", "accountants": ["rdp", "pld"]}
    return resolve_run({**base, **kw})


def test_end_to_end_summary_names_the_mf_accountant_and_excludes_dp_sgd_ones(synth, tmp_path):
    cfg = _cfg()
    summary = loop.train(cfg, synth, tmp_path).as_dict()
    assert set(summary["epsilon"]) == {"mf"}
    assert summary["epsilon"]["mf"] <= 2.0 + 1e-9
    assert set(summary["excluded_accountants"]) == {"rdp", "pld"}
    assert all("correlated noise" in why for why in summary["excluded_accountants"].values())
    mf = summary["matrix_factorization"]
    assert mf["sampler"]["name"] == "min_separation" and mf["sampler"]["min_separation"] == 12  # 60 // 5
    assert summary["epsilon_accountant"]["mf"]["delta"] == 1e-5
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0]
    assert header.endswith("epsilon_mf")
    eps = np.loadtxt(tmp_path / "metrics.csv", delimiter=",", skiprows=1, usecols=-1)
    assert np.all(np.diff(eps) >= 0)  # ε of the first t steps grows with t


@pytest.mark.slow
def test_calibrated_sigma_meets_target_and_matches_seed_004():
    """004 §4.3 setting, one epoch (b = 200 = T, p = 1): a single Gaussian of sensitivity 1;
    calibrated σ gives ε = 1 at δ = 1e-6 (within the bisection tolerance) and matches the
    exact analytic Gaussian mechanism, ≈ 4 as 004 reports."""
    cfg = _cfg(strategy="optimal", bands=None, steps=200, batch_size=25, target_epsilon=1.0, delta=1e-6)
    mech = dp_mf.prepare(RunSettings.of(cfg), 5000, [100, 200])
    sigma = mech.plan.noise_multiplier
    assert mech.plan.curves["mf"][-1] <= 1.0 and mech.plan.curves["mf"][-1] > 1.0 - 1e-3
    analytic = get("gaussian_analytic").sigma(Setting(noise_multiplier=1.0, steps=1, sensitivity=1.0,
                                                      neighbouring="add_remove", sampling="full_batch"), 1.0, 1e-6)
    assert sigma == pytest.approx(analytic, rel=1e-3)
    assert 3.5 < sigma < 4.5


@pytest.mark.slow
def test_identity_cyclic_poisson_one_partition_is_poisson_dp_sgd():
    """C = I with one partition is Poisson-sampled DP-SGD: the MF accountant's σ at ε = 1 gives
    ε = 1 under the registered PLD accountant of DP-SGD on the same setting."""
    cfg = _cfg(strategy="identity", bands=None, steps=200, batch_size=25, target_epsilon=1.0, delta=1e-6,
               sampling="cyclic_poisson", min_separation=1)
    sigma = dp_mf.prepare(RunSettings.of(cfg), 5000, [200]).plan.noise_multiplier
    setting = Setting(noise_multiplier=sigma, steps=200, sampling="poisson", neighbouring="add_remove",
                      dataset_size=5000, batch_size=25)
    assert get("pld").epsilon(setting, 1e-6) == pytest.approx(1.0, abs=2e-3)


def test_accountant_receives_the_training_sampler(synth):
    cfg = _cfg(sampling="cyclic_poisson", min_separation=4)
    mech = dp_mf.prepare(RunSettings.of(cfg), 60, [12])
    assert isinstance(mech.sampler.spec, mf_accounting.CyclicPoisson)
    assert mech.plan.details["matrix_factorization"]["sampler"]["sampling_rate"] == pytest.approx(5 * 4 / 60)
    g = torch.Generator().manual_seed(0)
    steps = [set(mech.sampler.sample(t, g).tolist()) for t in range(1, 13)]
    parts = [set(p.tolist()) for p in mech.sampler.parts]
    for t, batch in enumerate(steps):
        assert batch <= parts[t % 4]  # step t draws only from partition t mod b


@pytest.mark.parametrize("change, key", [
    ({"strategy": "optimal", "bands": None, "sampling": "cyclic_poisson", "min_separation": 4}, "bands"),  # dense C
    ({"sampling": "cyclic_poisson", "min_separation": 4, "neighbouring": "replace_one"}, "neighbouring"),
    ({"bands": 5, "min_separation": 4, "batch_size": 15}, "bands"),  # bands > b
    ({"participations": 3}, "participations"),  # 12 steps, b = 12 → k = 1
    ({"min_separation": 7}, "batch_size"),  # 7 fixed batches of 60 hold 8, not 5
])
def test_sampler_mismatch_is_refused(synth, tmp_path, change, key):
    with pytest.raises(DPLabError) as err:
        loop.train(_cfg(**change), synth, tmp_path)
    assert key in err.value.key
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("raw, key", [
    ({"sampling": "poisson"}, "sampling"),
    ({"accountant": "rdp"}, "accountant"),
    ({"strategy": None}, "strategy"),
    ({"bands": None}, "bands"),
])
def test_config_rules(raw, key):
    with pytest.raises(DPLabError) as err:
        _cfg(**raw)
    assert key in err.value.key
    with pytest.raises(DPLabError):
        resolve_run({"method": "dp_sgd", "strategy": "banded"})


def test_killed_run_resumes_byte_identical(synth, tmp_path):
    cfg = _cfg(strategy="banded", bands=3, steps=20, min_separation=4, batch_size=15, checkpoint_every=7)
    loop.train(cfg, synth, tmp_path / "full")

    def crash(step):
        if step == 12:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        loop.train(cfg, synth, tmp_path / "resumed", hook=crash)
    state = checkpoint.read(tmp_path / "resumed" / "checkpoint.pt")
    assert state["step"] == 7 and len(state["noise"]["past"]) == 2  # bands − 1 held noise vectors
    loop.train(cfg, synth, tmp_path / "resumed")
    for name in ("metrics.csv", "summary.json"):
        assert (tmp_path / "full" / name).read_bytes() == (tmp_path / "resumed" / name).read_bytes(), name
    full, resumed = torch.load(tmp_path / "full" / "model.pt"), torch.load(tmp_path / "resumed" / "model.pt")
    assert all(torch.equal(full[k], resumed[k]) for k in full)


def test_cached_factorization_is_checked_against_the_run(synth, tmp_path):
    cfg = _cfg()
    fact = factorizations.banded(prefix_sum(12), 3)
    factorizations.save(fact, tmp_path / f"{layout.cache_key('banded', 12, 3)}.npz")
    loaded = dp_mf.load_factorization(RunSettings.of(cfg), tmp_path)
    np.testing.assert_array_equal(loaded.encoder, fact.encoder)
    factorizations.save(factorizations.banded(prefix_sum(12), 2), tmp_path / f"{layout.cache_key('banded', 12, 3)}.npz")
    with pytest.raises(DPLabError, match="bands=2"):
        dp_mf.load_factorization(RunSettings.of(cfg), tmp_path)
    a = loop.train(cfg, synth, tmp_path / "a", factorization=fact)
    b = loop.train(cfg, synth, tmp_path / "b")
    assert a.text() == b.text()


def _summary(path, method, seed, eps, acc):
    mf = method == "dp_mf"
    run = {"method": method, "seed": seed, "noise_multiplier": 1.0}
    if mf:
        run.update(sampling="cyclic_poisson", strategy="banded", bands=4, min_separation=4)
    setting = None if mf else {"noise_multiplier": 1.0, "sampling_rate": 0.05, "steps": 10, "sampling": "poisson"}
    path.write_text(json.dumps(summary_json(run, {"test_accuracy": acc, "test_loss": 1 - acc},
                                            epsilon={"mf" if mf else "pld": eps}, delta=1e-6, noise_multiplier=1.0,
                                            setting=setting,
                                            update={"noise": "correlated" if mf else "independent", "normalize": "expected"})))
    return str(path)


def test_comparison_table_columns_and_matched_epsilon(tmp_path):
    from dplab.figures import mf_vs_dpsgd

    accs = {"dp_mf": [0.6, 0.7, 0.5], "dp_sgd": [0.4, 0.5, 0.6]}
    files = [_summary(tmp_path / f"{m}{s}.json", m, s, 1.0, a) for m in accs for s, a in enumerate(accs[m])]
    table = mf_vs_dpsgd.table({"summaries": files}, {})
    assert list(table.columns) == ["variant", "method", "accountant", "epsilon", "delta", "noise_multiplier", "seeds",
                                   "test_accuracy_mean", "test_accuracy_sd", "test_accuracy_se",
                                   "test_loss_mean", "test_loss_sd", "test_loss_se"]
    mf = table[table.method == "dp_mf"].iloc[0]
    assert (mf.seeds, mf.accountant) == (3, "mf")
    assert mf.test_accuracy_mean == pytest.approx(0.6) and mf.test_accuracy_sd == pytest.approx(0.1)
    assert mf.test_accuracy_se == pytest.approx(0.1 / np.sqrt(3))
    files.append(_summary(tmp_path / "late.json", "dp_sgd", 9, 1.5, 0.9))  # ε not matched
    with pytest.raises(DPLabError, match="epsilon differs"):
        mf_vs_dpsgd.table({"summaries": files}, {})
