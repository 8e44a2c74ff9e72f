"""Tables of the figures drawn from training runs, recomputed from the runs' own files."""

from __future__ import annotations

import json

import dp_accounting
import numpy as np
import pandas as pd
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from conftest import synthetic_data
from conftest import SMALL_PHASED, summary_json
from dplab import jobs, layout
from dplab.accounting.registry import get
from dplab.accounting.setting import Setting
from dplab.figures import figure, runs
from dplab.training import loop
from dplab.training.methods import update_of
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings
from dplab.training.summary import RunSummary


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return synthetic_data(tmp_path_factory.mktemp("synth"), 300, 100)


def train(synth, tmp_path, name, **run):
    out = tmp_path / name
    loop.train(
        RunSettings.of(resolve_run({"dataset": "synthetic", "name": name, **run})), synth, out
    )
    return out


def test_grad_norms_at_the_initial_point_match_the_closed_form(synth, tmp_path):
    """Logistic regression starts at θ = 0: p is uniform over K classes, so the per-example norm is
    ‖p − e_y‖·‖(x, 1)‖ = √((1 − 1/K)² + (K − 1)/K²)·√(‖x‖² + 1); the table's quantile is theirs."""
    out = train(
        synth,
        tmp_path,
        "gd",
        method="sgd",
        sampling="full_batch",
        steps=1,
        lr=0.1,
        record_grad_norms=True,
    )
    recorded = pd.read_csv(out / "grad_norms.csv")
    k = 3
    x = synth.x_train.numpy().reshape(len(synth.y_train), -1)
    expected = np.sqrt((1 - 1 / k) ** 2 + (k - 1) / k**2) * np.sqrt((x**2).sum(1) + 1)
    assert (recorded.step == 1).all()
    np.testing.assert_allclose(recorded.grad_norm.to_numpy(), expected, rtol=1e-5)
    params = {"run": "gd", "quantile": 0.95, "points": 50, "bins": 10}
    table = figure("grad_norms").table(
        {"grad_norms": str(out / "grad_norms.csv"), "summary": str(out / "summary.json")}, params
    )
    q = table[table.kind == "quantile"].grad_norm.iloc[0]
    assert q == pytest.approx(np.quantile(expected, 0.95), rel=1e-5)
    assert table[table.kind == "histogram"]["count"].sum() == len(expected)
    cdf = table[table.kind == "cdf"]
    assert cdf.grad_norm.is_monotonic_increasing and cdf.grad_norm.iloc[-1] == pytest.approx(
        expected.max(), rel=1e-5
    )


def test_grad_norms_are_optional_and_logged_per_batch(synth, tmp_path):
    out = train(
        synth,
        tmp_path,
        "b",
        method="sgd",
        sampling="without_replacement",
        batch_size=16,
        steps=10,
        log_every=5,
        record_grad_norms=True,
    )
    assert pd.read_csv(out / "grad_norms.csv").groupby("step").size().to_dict() == {5: 16, 10: 16}
    plain = train(synth, tmp_path, "p", method="sgd", steps=3)
    assert (plain / "grad_norms.csv").read_text().count(
        "\n"
    ) == 1  # every run has the file: header only


def test_nonprivate_training_stars_the_best_logged_values(synth, tmp_path):
    out = train(synth, tmp_path, "np", method="sgd", steps=30, log_every=5, lr=1.0)
    metrics = pd.read_csv(out / "metrics.csv")
    table = figure("nonprivate_training").table(
        {"summary": str(out / "summary.json"), "metrics": str(out / "metrics.csv")}, {"run": "np"}
    )
    best = table[table.best].set_index("metric").value
    assert (
        best["test_loss"] == metrics.test_loss.min()
        and best["test_accuracy"] == metrics.test_accuracy.max()
    )
    assert len(table) == 2 * len(metrics)


def _fake_summary(folder, name, method, eps, seed, acc, accountant="rdp", setting=None):
    """A grid run's summary.json; ``setting`` (a Setting) replaces the default σ = 1, q = 0.1,
    T = 10 (Poisson) one."""
    run = {"name": name, "method": method, "model": "logreg", "steps": 10, "lr": 0.1}
    if eps:
        run.update(clip=1.0, accountant=accountant, target_epsilon=eps)
    if setting is not None:
        run.update(steps=setting.steps, sampling=setting.sampling)
        setting = {k: v for k, v in setting.as_dict().items() if v is not None}
    elif eps:
        setting = {
            "noise_multiplier": 1.0,
            "sampling_rate": 0.1,
            "steps": 10,
            "sampling": "poisson",
        }
    summary = summary_json(
        run,
        {"test_accuracy": acc},
        sampling=setting["sampling"] if setting else "poisson",
        setting=setting,
        batch_size=setting.get("batch_size", 10) if setting else 10,
        noise_multiplier=setting["noise_multiplier"] if setting else None,
        delta=1e-5 if eps else None,
        neighbouring="add_remove",
        epsilon={accountant: eps} if eps else {},
        epsilon_covers={accountant: "every iterate"} if eps else {},
        update={"noise": "independent" if eps else "none", "normalize": "expected"},
    )
    path = folder / name / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(summary))
    return str(path)


def test_privacy_utility_mean_and_sd_over_seeds(tmp_path):
    rng = np.random.default_rng(1)
    accs = {(m, e): rng.uniform(0.5, 0.9, 3) for m in ("dp_sgd", "dp_gd") for e in (0.5, 2.0)}
    paths = [
        _fake_summary(tmp_path, f"synthetic/logreg/{m}/eps{e:g}/seed{s}", m, e, s, acc[s])
        for (m, e), acc in accs.items()
        for s in range(3)
    ]
    paths += [
        _fake_summary(
            tmp_path, f"synthetic/logreg/sgd/nonprivate/seed{s}", "sgd", None, s, 0.95 - 0.01 * s
        )
        for s in range(3)
    ]
    table = figure("privacy_utility").table({"summaries": paths}, {"grids": ["g"]})
    for (m, e), acc in accs.items():
        row = table[(table.variant == m) & (table.epsilon == e)].iloc[0]
        assert row.accuracy_mean == pytest.approx(acc.mean()) and row.accuracy_sd == pytest.approx(
            np.std(acc, ddof=1)
        )
        assert row.seeds == 3 and row.accountant == "rdp" and row.release == "every iterate"
    ref = table[table.variant == "sgd"].iloc[0]
    assert np.isnan(ref.epsilon) and ref.accuracy_mean == pytest.approx(0.94)
    # picking the better of the two methods at each ε by their means over 3 seeds: Papernot &
    # Steinke's protocol, K geometric with mean 2, each candidate its 3 runs composed
    # (dp_accounting's RepeatAndSelectDpEvent on the 3-run composition)
    step = dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.0))
    three = dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(step, 10)] * 3)
    peer = rdp_privacy_accountant.RdpAccountant().compose(
        dp_event.RepeatAndSelectDpEvent(three, 2.0, 1.0)
    )
    private = table.dropna(subset=["epsilon"])
    assert private.selection_epsilon.to_numpy() == pytest.approx(peer.get_epsilon(1e-5), rel=1e-6)
    assert (
        private.selection_epsilon
        > get("rdp").epsilon(
            Setting(noise_multiplier=1.0, sampling_rate=0.1, steps=10, sampling="poisson"), 1e-5
        )
    ).all()
    assert private.selection_note.str.contains("best of dp_gd, dp_sgd").all() and np.isnan(
        ref.selection_epsilon
    )
    # what the grid ran at each ε: 2 methods × 3 seeds of 10 steps, 60 steps composed
    composed = Setting(noise_multiplier=1.0, sampling_rate=0.1, steps=60, sampling="poisson")
    assert private.grid_epsilon.to_numpy() == pytest.approx(
        get("rdp").epsilon(composed, 1e-5), rel=1e-12
    )
    assert np.isnan(ref.grid_epsilon)


#: the worked example's grid at ε = 1 (config/examples/own_experiment.yaml, docs/own_experiment.md):
#: DP-GD 50 full-batch steps and DP-SGD 150 Poisson steps of b = 64 on 900 records, σ calibrated
#: by rdp to ε = 1 at δ = 1e-5, two seeds each
OWN_GD = Setting(noise_multiplier=28.60526573666496, sampling="full_batch", steps=50)
OWN_SGD = Setting(
    noise_multiplier=3.7378766576488065,
    batch_size=64,
    dataset_size=900,
    steps=150,
    sampling="poisson",
)


def test_privacy_utility_selection_composes_each_methods_seeds(tmp_path):
    """The example's cell at ε = 1: a method is picked on its mean over 2 seeds, so each candidate
    of Papernot & Steinke's protocol is 2 runs composed (the table printed 1.5636, the bound with
    one run per candidate): dp_accounting's RepeatAndSelectDpEvent on each method's 2-run
    composition gives 2.2183 (DP-GD) and 2.1779 (DP-SGD), and the worst of both curves is DP-GD's
    at the orders that matter."""
    paths = [
        _fake_summary(tmp_path, f"loans/net/{m}/eps1/seed{s}", m, 1.0, s, 0.8, setting=setting)
        for m, setting in (("dp_gd", OWN_GD), ("dp_sgd", OWN_SGD))
        for s in range(2)
    ]
    table = figure("privacy_utility").table({"summaries": paths}, {"grids": ["g"]})
    assert (table.seeds == 2).all() and (table.epsilon_claimed_max == 1.0).all()
    gd = dp_accounting.GaussianDpEvent(OWN_GD.noise_multiplier)
    sgd = dp_accounting.PoissonSampledDpEvent(
        64 / 900, dp_accounting.GaussianDpEvent(OWN_SGD.noise_multiplier)
    )
    peers = [
        rdp_privacy_accountant.RdpAccountant()
        .compose(
            dp_event.RepeatAndSelectDpEvent(
                dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(e, t)] * 2),
                2.0,
                1.0,
            )
        )
        .get_epsilon(1e-5)
        for e, t in ((gd, 50), (sgd, 150))
    ]
    assert peers == pytest.approx([2.2183, 2.1779], abs=1e-4)
    assert table.selection_epsilon.to_numpy() == pytest.approx(peers[0], rel=1e-6)
    # the grid that ran: 4 runs composed
    assert table.grid_epsilon.to_numpy() == pytest.approx(2.1140, abs=1e-4)


def test_privacy_utility_a_run_without_an_rdp_curve_leaves_the_cell_unpriced(tmp_path):
    """A shuffle variant (fixed_batches, no RDP curve) beside DP-SGD: the grid released the best of
    both, so neither row prints a grid ε (DP-SGD's alone, 2.101, left the other run's ε of 46.2
    out); the note says why, and K's mean counts both candidates."""
    sgd = Setting(noise_multiplier=1.0, sampling_rate=0.01, steps=1000, sampling="poisson")
    shuffle = Setting(
        noise_multiplier=1.0, sampling="shuffle", dataset_size=1005, batch_size=10, steps=1000
    )
    paths = [
        _fake_summary(tmp_path, "s/m/dp_sgd/eps2/seed0", "dp_sgd", 2.0, 0, 0.8, setting=sgd),
        _fake_summary(
            tmp_path,
            "s/m/dp_sgd_fixed_batches/eps2/seed0",
            "dp_sgd",
            2.0,
            0,
            0.8,
            accountant="fixed_batches",
            setting=shuffle,
        ),
    ]
    table = figure("privacy_utility").table({"summaries": paths}, {"grids": ["g"]})
    assert len(table) == 2 and table.grid_epsilon.isna().all()
    assert table.selection_epsilon.isna().all()
    note = table.selection_note.iloc[0]
    assert "no RDP curve: dp_sgd_fixed_batches (sampling: shuffle" in note and "mean 2" in note


def test_hidden_state_gain_reads_every_valid_curve_and_every_exclusion(synth, tmp_path):
    """noisy GD on a strongly convex loss: 002 Cor. 1 (langevin) converges in T while composition
    grows, so after enough steps the hidden-state ε is below every composition ε."""
    out = train(
        synth,
        tmp_path,
        "hs",
        method="noisy_gd",
        l2=0.05,
        diameter=4.0,
        clip=3.0,
        lr=0.5,
        noise_multiplier=20.0,
        steps=400,
        log_every=100,
        neighbouring="replace_one",
        accountants=["rdp", "pld", "langevin", "pabi"],
    )
    metrics = pd.read_csv(out / "metrics.csv")
    table = figure("hidden_state_gain").table(
        {"summaries": [str(out / "summary.json")], "metrics": [str(out / "metrics.csv")]},
        {"runs": ["hs"], "skip": []},
    )
    for name in ("rdp", "pld", "langevin"):
        rows = table[table.accountant == name]
        np.testing.assert_array_equal(
            rows.epsilon.to_numpy(), metrics[f"epsilon_{name}"].to_numpy()
        )
    hidden = table[table.accountant == "langevin"]
    best = np.minimum(metrics.epsilon_rdp, metrics.epsilon_pld).to_numpy()
    np.testing.assert_allclose(hidden.gain.to_numpy(), best / hidden.epsilon.to_numpy())
    assert hidden.release.iloc[0] == "last_iterate" and hidden.gain.iloc[-1] > 1
    refused = table[table.accountant == "pabi"]
    assert (
        len(refused) == 1 and refused.epsilon.isna().all() and "shuffle" in refused.reason.iloc[0]
    )
    (ax,) = figure("hidden_state_gain").draw(table).axes  # one setting: its values on one line
    assert ax.get_title().endswith("\nσ=20, η=0.5, C=3, b=300, replace-one")


def test_figure_inputs_name_the_pipeline_files():
    from dplab.schemas import validate

    config = validate(
        {
            "datasets": {"digits": {"kind": "digits"}},
            "runs": {"a": {"method": "sgd", "record_grad_norms": True}},
            "figures": {"grad_norms": {"run": "a"}},
        }
    )
    plan = jobs.plan(config)
    assert plan.job("figure_table", "grad_norms").inputs == {
        "grad_norms": "results/runs/a/grad_norms.csv",
        "summary": "results/runs/a/summary.json",
    }
    assert layout.run_files("a")["grad_norms"] in plan.targets


def _phased_summary() -> RunSummary:
    """The tests' small config's run in phases as its summary.json reads (dplab.training.phased),
    its phases' settings built as the run builds them, on 1437 records, without training."""
    from dplab.training.privacy import build_setting
    from dplab.training.resolve import phase_runs

    phases = [RunSettings.of(r) for r in phase_runs(resolve_run(SMALL_PHASED))]
    settings = [build_setting(p, 1437, p.b(1437), 650, p.noise_multiplier, {}) for p in phases]
    data = summary_json(
        SMALL_PHASED,
        sampling="poisson",
        neighbouring="add_remove",
        batch_size=128,
        delta=1e-5,
        epsilon={"rdp": 1.615, "pld": 1.297},
        excluded_accountants={"naive": "not a composition of phases"},
        risk={"unavailable": "pld: too few bins"},
        phases=[s.as_dict() for s in settings],
        update=update_of(phases[0]).as_dict(),
    )
    return RunSummary.of(data)


def test_a_run_in_phases_is_described_by_each_phases_values():
    info = runs.describe(_phased_summary())
    rates = " → ".join(f"{b / 1437:.4g}" for b in (64, 128))
    assert info["noise_multiplier"] == "1.2 → 2" and info["sampling_rate"] == rates
    assert info["batch_size"] == "64 → 128" and info["lr"] == "0.5 → 0.3"
    assert info["clip"] == 1.0 and info["steps"] == 30  # one value: the phases share it
    sgd = RunSettings.of(resolve_run({"method": "sgd"}))
    plain = summary_json({"method": "sgd"}, batch_size=64, update=update_of(sgd).as_dict())
    assert runs.describe(RunSummary.of(plain))["batch_size"] == 64  # a run of one setting


def test_the_index_row_of_a_run_in_phases_names_its_epsilon_and_why_no_risk(tmp_path):
    from dplab.commands.figures import run_risks

    folder = tmp_path / "runs" / "dp_sgd_phases"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(_phased_summary().as_dict()))
    row = run_risks(tmp_path)[-1]
    assert row == (
        "| dp_sgd_phases | rdp 1.615, pld 1.297 (δ = 1e-05) | — | — | no risk: pld: too few bins |"
    )
