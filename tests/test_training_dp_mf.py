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
from dplab.mf import factorizations, saved
from dplab.mf.workload import prefix_sum
from dplab.training import checkpoint, data, loop
from dplab.training.methods import dp_mf
from dplab.training.resolve import resolve_run


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 60, "test_size": 20, "dim": 5, "classes": 3}, "s"
    )
    out = tmp_path_factory.mktemp("synth")
    data.write(out, *data.prepare(cfg, "s"))
    return data.load(out)


def _cfg(**kw):
    base = {
        "method": "dp_mf",
        "dataset": "s",
        "strategy": "banded",
        "bands": 3,
        "steps": 12,
        "batch_size": 5,
        "min_separation": 12,
        "lr": 0.5,
        "clip": 1.0,
        "target_epsilon": 2.0,
        "delta": 1e-5,
        "log_every": 4,
        "checkpoint_every": 0,
        "device": "cpu",
        "accountants": ["rdp", "pld"],
    }
    return resolve_run({**base, **kw})


def test_end_to_end_summary_names_the_mf_accountant_and_excludes_dp_sgd_ones(synth, tmp_path):
    cfg = _cfg()
    summary = loop.train(RunSettings.of(cfg), synth, tmp_path).as_dict()
    assert set(summary["epsilon"]) == {"mf"}
    assert summary["epsilon"]["mf"] <= 2.0 + 1e-9
    assert set(summary["excluded_accountants"]) == {"rdp", "pld"}
    assert all("correlated noise" in why for why in summary["excluded_accountants"].values())
    mf = summary["matrix_factorization"]
    assert (
        mf["sampler"]["name"] == "min_separation" and mf["sampler"]["min_separation"] == 12
    )  # 60 // 5
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
    cfg = _cfg(
        strategy="optimal",
        bands=None,
        steps=200,
        batch_size=25,
        target_epsilon=1.0,
        delta=1e-6,
        min_separation=200,
    )
    mech = dp_mf.prepare(RunSettings.of(cfg), 5000, [100, 200])
    sigma = mech.plan.noise_multiplier
    assert mech.plan.curves["mf"][-1] <= 1.0 and mech.plan.curves["mf"][-1] > 1.0 - 1e-3
    analytic = get("gaussian_analytic").sigma(
        Setting(
            noise_multiplier=1.0,
            steps=1,
            sensitivity=1.0,
            neighbouring="add_remove",
            sampling="full_batch",
        ),
        1.0,
        1e-6,
    )
    assert sigma == pytest.approx(analytic, rel=1e-3)
    assert 3.5 < sigma < 4.5


@pytest.mark.slow
def test_identity_cyclic_poisson_one_partition_is_poisson_dp_sgd():
    """C = I with one partition is Poisson-sampled DP-SGD: the MF accountant's σ at ε = 1 gives
    ε = 1 under the registered PLD accountant of DP-SGD on the same setting."""
    cfg = _cfg(
        strategy="identity",
        bands=None,
        steps=200,
        batch_size=25,
        target_epsilon=1.0,
        delta=1e-6,
        sampling="cyclic_poisson",
        min_separation=1,
    )
    sigma = dp_mf.prepare(RunSettings.of(cfg), 5000, [200]).plan.noise_multiplier
    setting = Setting(
        noise_multiplier=sigma,
        steps=200,
        sampling="poisson",
        neighbouring="add_remove",
        dataset_size=5000,
        batch_size=25,
    )
    assert get("pld").epsilon(setting, 1e-6) == pytest.approx(1.0, abs=2e-3)


def test_accountant_receives_the_training_sampler(synth):
    cfg = _cfg(sampling="cyclic_poisson", min_separation=4)
    mech = dp_mf.prepare(RunSettings.of(cfg), 60, [12])
    assert isinstance(mech.sampler.spec, mf_accounting.CyclicPoisson)
    assert mech.plan.details["matrix_factorization"]["sampler"]["sampling_rate"] == pytest.approx(
        5 * 4 / 60
    )
    g = torch.Generator().manual_seed(0)
    steps = [set(mech.sampler.sample(t, g).tolist()) for t in range(1, 13)]
    parts = [set(p.tolist()) for p in mech.sampler.parts]
    for t, batch in enumerate(steps):
        assert batch <= parts[t % 4]  # step t draws only from partition t mod b


@pytest.mark.parametrize(
    "change, key",
    [
        (
            {
                "strategy": "optimal",
                "bands": None,
                "sampling": "cyclic_poisson",
                "min_separation": 4,
            },
            "strategy",
        ),  # dense C: the run sets no bands, its strategy is what to change
        (
            {"sampling": "cyclic_poisson", "min_separation": 4, "neighbouring": "replace_one"},
            "neighbouring",
        ),
        ({"bands": 5, "min_separation": 4, "batch_size": 15}, "bands"),  # bands > b
        ({"participations": 3}, "participations"),  # 12 steps, b = 12 → k = 1
        ({"min_separation": 7}, "batch_size"),  # 7 partitions of 60 hold 8.6 on average, not 5
    ],
)
def test_sampler_mismatch_is_refused(synth, tmp_path, change, key):
    with pytest.raises(DPLabError) as err:
        loop.train(RunSettings.of(_cfg(**change)), synth, tmp_path)
    assert key in err.value.key
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize(
    "n, neighbouring, refused",
    [
        (60, "add_remove", True),  # n mod batch = 0: n − 1 records make 11 partitions
        (64, "add_remove", True),  # n mod batch = batch − 1: n + 1 make 13
        (61, "add_remove", False),
        (63, "add_remove", False),
        (60, "replace_one", False),  # n fixed
    ],
)
def test_partitions_from_n_are_refused_where_a_neighbour_changes_them(n, neighbouring, refused):
    """min_separation null takes b = ⌊n/batch_size⌋ from the dataset: under add_remove only where
    ⌊(n ± 1)/batch_size⌋ = b (else every record's partition is drawn anew in the neighbour); a
    given min_separation does not depend on n."""
    run = RunSettings.of(_cfg(min_separation=None, neighbouring=neighbouring))
    if refused:
        with pytest.raises(
            DPLabError,
            match=r"min_separation: null takes b = "
            r"floor\(n/batch_size\) = 12 .* set min_separation = 12",
        ):
            dp_mf.sampler_spec(run, n)
    else:
        assert dp_mf.sampler_spec(run, n).min_separation == 12
    assert dp_mf.sampler_spec(RunSettings.of(_cfg()), 60).min_separation == 12


@pytest.mark.parametrize(
    "change, n, key, says",
    [
        # amplified BandMF: add_remove only (mf_accounting.check_amplified_neighbouring)
        (
            {"sampling": "cyclic_poisson", "min_separation": 4, "neighbouring": "replace_one"},
            60,
            "neighbouring",
            "proved for add_remove only",
        ),
        # a dense C (sqrt: T = 12 bands) over b = 4 partitions: no amplification holds
        (
            {"strategy": "sqrt", "bands": None, "sampling": "cyclic_poisson", "min_separation": 4},
            60,
            "strategy",
            "strategy sqrt has 12",
        ),
        (
            {
                "strategy": "banded_toeplitz",
                "bands": 5,
                "sampling": "cyclic_poisson",
                "min_separation": 4,
            },
            60,
            "bands",
            "at most b bands; got bands = 5",
        ),
        # banded needs bands <= b, b given or taken from n (⌊61/5⌋ = 12 < 13 bands)
        ({"bands": 13, "steps": 20, "min_separation": 12}, 60, "bands", "min_separation = 12"),
        (
            {"bands": 13, "steps": 20, "min_separation": None},
            61,
            "bands",
            r"b = floor\(n/batch_size\) = floor\(61/5\) = 12",
        ),
        (
            {"bands": 13, "steps": 20, "min_separation": None, "sampling": "cyclic_poisson"},
            61,
            "bands",
            "= 12; got 13",
        ),
    ],
)
def test_what_the_accountant_or_factorization_would_refuse_the_sampler_spec_refuses(
    change, n, key, says
):
    """:func:`dp_mf.sampler_spec` (what `dplab check-config` runs: tests/test_config.py) refuses
    what training would refuse only after factorizing: the MF accountant's amplified-BandMF
    conditions and banded's bands <= b, also where b is ⌊n/batch_size⌋ (training asked
    ``factorize`` only with a given b)."""
    run = RunSettings.of(_cfg(**change))
    with pytest.raises(DPLabError, match=says) as err:
        dp_mf.sampler_spec(run, n)
    assert err.value.key == key
    with pytest.raises(DPLabError) as err:
        dp_mf.prepare(run, n, [run.steps])  # training: the same refusal, before any factorization
    assert err.value.key == key


def test_the_accountant_and_the_sampler_spec_share_the_amplified_conditions():
    """What the MF accountant refuses on the factorization, dp_mf's sampler spec refuses on the
    strategy: a C within b bands with add_remove passes both."""
    fact = factorizations.factorize("sqrt", prefix_sum(12))
    spec = mf_accounting.CyclicPoisson(60, 5, 4, 12)
    with pytest.raises(DPLabError, match="at most b bands"):
        mf_accounting.dp_event(fact, spec, 1.0)
    fits = mf_accounting.CyclicPoisson(60, 5, 12, 12)
    mf_accounting.dp_event(fact, fits, 1.0)  # b = T: every C is within b bands
    run = RunSettings.of(
        _cfg(strategy="sqrt", bands=None, sampling="cyclic_poisson", min_separation=12)
    )
    assert dp_mf.sampler_spec(run, 60) == fits


def _apply(fix: str) -> dict:
    """The keys of one fix the batch_size refusal suggests ("batch_size = 15 with
    min_separation = 4")."""
    return {key: int(value) for key, value in (part.split(" = ") for part in fix.split(" with "))}


@pytest.mark.parametrize(
    "n, change, fixes",
    [
        # null: b = ⌊402/35⌋ = 11 already, so only batch_size changes anything
        (402, {"batch_size": 35, "min_separation": None}, ["batch_size = 36"]),
        # b = 28 given, as ⌊1442/50⌋: no b gives 50
        (1442, {"batch_size": 50, "min_separation": 28}, ["batch_size = 51"]),
        (60, {"min_separation": 7}, ["batch_size = 8", "min_separation = 12"]),
        # null under add_remove: batch 15 would take b from 60 = 4·15 (a neighbour changes it)
        (
            60,
            {"batch_size": 13, "min_separation": None},
            ["batch_size = 15 with min_separation = 4"],
        ),
        # min_separation 12 would hold ⌊60/12⌋ = 5, but not 13 bands
        (60, {"min_separation": 13, "bands": 13, "steps": 20}, ["batch_size = 4"]),
    ],
)
def test_the_batch_size_refusal_suggests_only_fixes_that_change_the_run_and_pass(n, change, fixes):
    """⌊n/b⌋ != batch_size: each fix suggested changes a key's value and makes the sampler spec
    pass; none repeats what the run already has (min_separation null is b = ⌊n/batch_size⌋)."""
    cfg = _cfg(**change)
    with pytest.raises(DPLabError) as err:
        dp_mf.sampler_spec(RunSettings.of(cfg), n)
    assert err.value.key == "batch_size"
    assert err.value.message.split("; set ")[1].split(" or ") == fixes
    for fix in fixes:
        keys = _apply(fix)
        assert any(cfg[key] != value for key, value in keys.items())
        dp_mf.sampler_spec(RunSettings.of(_cfg(**{**change, **keys})), n)


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"sampling": "poisson"}, "sampling"),
        ({"accountant": "rdp"}, "accountant"),
        ({"strategy": None}, "strategy"),
        ({"bands": None}, "bands"),
        ({"bands": 13}, "bands"),  # banded: bands <= T = 12 (factorizations.banded's range)
    ],
)
def test_config_rules(raw, key):
    with pytest.raises(DPLabError) as err:
        _cfg(**raw)
    assert key in err.value.key
    with pytest.raises(DPLabError):
        resolve_run({"method": "dp_sgd", "strategy": "banded"})


def killed_and_resumed(cfg, data, tmp_path) -> dict:
    """Train ``cfg`` through (``full``) and again killed after step 12, then rerun
    (``resumed``); assert both end with the same metrics.csv, summary.json and parameters; the
    killed run's checkpoint."""
    loop.train(RunSettings.of(cfg), data, tmp_path / "full")

    def crash(step):
        if step == 12:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        loop.train(RunSettings.of(cfg), data, tmp_path / "resumed", hook=crash)
    state = checkpoint.read(tmp_path / "resumed" / "checkpoint.pt")
    loop.train(RunSettings.of(cfg), data, tmp_path / "resumed")
    for name in ("metrics.csv", "summary.json"):
        assert (tmp_path / "full" / name).read_bytes() == (
            tmp_path / "resumed" / name
        ).read_bytes(), name
    full, resumed = (
        torch.load(tmp_path / "full" / "model.pt"),
        torch.load(tmp_path / "resumed" / "model.pt"),
    )
    assert all(torch.equal(full[k], resumed[k]) for k in full)
    return state


def test_killed_run_resumes_byte_identical(synth, tmp_path):
    cfg = _cfg(
        strategy="banded", bands=3, steps=20, min_separation=4, batch_size=15, checkpoint_every=7
    )
    state = killed_and_resumed(cfg, synth, tmp_path)
    assert state["step"] == 7 and len(state["noise"]["past"]) == 2  # bands − 1 held noise vectors


def test_cached_factorization_is_checked_against_the_run(synth, tmp_path):
    cfg = _cfg()
    fact = factorizations.banded(prefix_sum(12), 3)
    saved.save(fact, tmp_path / f"{layout.cache_key('banded', 12, 3)}.npz")
    loaded = dp_mf.load_factorization(RunSettings.of(cfg), tmp_path)
    np.testing.assert_array_equal(loaded.encoder, fact.encoder)
    other = factorizations.banded(prefix_sum(12), 2)
    saved.save(other, tmp_path / f"{layout.cache_key('banded', 12, 3)}.npz")
    with pytest.raises(DPLabError, match="bands=2"):
        dp_mf.load_factorization(RunSettings.of(cfg), tmp_path)
    a = loop.train(RunSettings.of(cfg), synth, tmp_path / "a", factorization=fact)
    b = loop.train(RunSettings.of(cfg), synth, tmp_path / "b")
    assert a.text() == b.text()


def _summary(path, method, seed, eps, acc):
    mf = method == "dp_mf"
    run = {"method": method, "seed": seed, "noise_multiplier": 1.0}
    if mf:
        run.update(sampling="cyclic_poisson", strategy="banded", bands=4, min_separation=4)
    setting = (
        None
        if mf
        else {"noise_multiplier": 1.0, "sampling_rate": 0.05, "steps": 10, "sampling": "poisson"}
    )
    path.write_text(
        json.dumps(
            summary_json(
                run,
                {"test_accuracy": acc, "test_loss": 1 - acc},
                epsilon={"mf" if mf else "pld": eps},
                delta=1e-6,
                noise_multiplier=1.0,
                setting=setting,
                update={"noise": "correlated" if mf else "independent", "normalize": "expected"},
            )
        )
    )
    return str(path)


def test_comparison_table_columns_and_matched_epsilon(tmp_path):
    from dplab.figures import mf_vs_dpsgd

    accs = {"dp_mf": [0.6, 0.7, 0.5], "dp_sgd": [0.4, 0.5, 0.6]}
    files = [
        _summary(tmp_path / f"{m}{s}.json", m, s, 1.0, a)
        for m in accs
        for s, a in enumerate(accs[m])
    ]
    table = mf_vs_dpsgd.table({"summaries": files}, {})
    assert list(table.columns) == [
        "variant",
        "method",
        "accountant",
        "epsilon",
        "delta",
        "noise_multiplier",
        "seeds",
        "test_accuracy_mean",
        "test_accuracy_sd",
        "test_accuracy_se",
        "test_loss_mean",
        "test_loss_sd",
        "test_loss_se",
    ]
    mf = table[table.method == "dp_mf"].iloc[0]
    assert (mf.seeds, mf.accountant) == (3, "mf")
    assert mf.test_accuracy_mean == pytest.approx(0.6) and mf.test_accuracy_sd == pytest.approx(0.1)
    assert mf.test_accuracy_se == pytest.approx(0.1 / np.sqrt(3))
    files.append(_summary(tmp_path / "late.json", "dp_sgd", 9, 1.5, 0.9))  # ε not matched
    with pytest.raises(DPLabError, match="epsilon differs"):
        mf_vs_dpsgd.table({"summaries": files}, {})


# banded_toeplitz and blt: optimized and streamed without a T×T matrix


def _toeplitz_cfg(**kw):
    base = {
        "strategy": "blt",
        "bands": None,
        "buffers": 2,
        "steps": 24,
        "min_separation": 12,
        "target_epsilon": None,
        "noise_multiplier": 2.0,
        "accountant": "mf",
        "accountants": ["mf"],
    }
    return _cfg(**{**base, **kw})


def _dplab_mf(capsys, *argv) -> dict:
    from dplab.cli import main

    assert main(["mf", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("strategy", ["blt", "banded_toeplitz"])
def test_toeplitz_run_streams_filter_noise_and_its_epsilon_is_dplab_mf_s(
    synth, tmp_path, capsys, monkeypatch, strategy
):
    """The run's ε at T is the one `dplab mf` prints for the same strategy, T, b, σ, δ; its
    noise is the FilterNoise stream and no T×T matrix is built (the prefix-sum matrix and a
    dense Factorization are refused while it trains); its summary's errors are those of the
    Toeplitz factorization."""
    from dplab.mf.noise import FilterNoise

    def dense(*args, **kwargs):
        raise AssertionError("a T×T matrix in a Toeplitz run")

    monkeypatch.setattr(dp_mf, "prefix_sum", dense)
    monkeypatch.setattr(dp_mf, "Factorization", dense)

    shape = {"buffers": 2} if strategy == "blt" else {"buffers": None, "bands": 3}
    cfg = _toeplitz_cfg(strategy=strategy, objective="max", **shape)
    mech = dp_mf.prepare(RunSettings.of(cfg), 60, [12, 24])
    assert isinstance(mech.noise.stream, FilterNoise)
    summary = loop.train(RunSettings.of(cfg), synth, tmp_path).as_dict()
    monkeypatch.undo()
    flags = ["--buffers", "2"] if strategy == "blt" else ["--bands", "3"]
    cli = _dplab_mf(
        capsys,
        "--strategy",
        strategy,
        "--steps",
        "24",
        *flags,
        "--objective",
        "max",
        "--min-separation",
        "12",
        "--noise-multiplier",
        "2",
        "--delta",
        "1e-5",
    )
    assert summary["epsilon"]["mf"] == pytest.approx(cli["epsilon"], rel=1e-12)
    mf = summary["matrix_factorization"]
    assert (mf["sensitivity"], mf["max_error"], mf["mean_error"]) == pytest.approx(
        (cli["sensitivity"], cli["max_error"], cli["mean_error"]), rel=1e-12
    )
    assert mf["max_column_norm"] == pytest.approx(1.0)  # ‖c‖ = 1: the first column is the longest
    assert mf["objective"] == "max" and mf["optimizer"]["participations"] == 2


def test_truncated_toeplitz_factorization_is_the_leading_block_of_the_dense_c():
    """C[:t, :t] of a lower-triangular Toeplitz C is the Toeplitz C of its first t coefficients:
    the truncated factorization's dense C, sensitivity and ε equal those of the dense leading block
    (the ε curve's rows)."""
    import scipy.linalg

    from dplab.mf import blt
    from dplab.mf.sensitivity import sensitivity

    fact = blt.blt(30, 2, "mean", 3, 10)
    dense = scipy.linalg.toeplitz(fact.coefficients, np.zeros(30))
    spec = mf_accounting.MinSeparation(10, 30, 60)
    for t in (7, 17, 30):
        sub, sub_spec = dp_mf.truncate(fact, spec, t)
        z = np.random.default_rng(t).normal(size=(t, 3))
        np.testing.assert_allclose(
            sub.inverse(z), np.linalg.solve(dense[:t, :t], z), rtol=1e-10, atol=1e-12
        )
        k = sub_spec.participations
        assert sub.sensitivity(k, 10).value == pytest.approx(
            sensitivity(dense[:t, :t], k, 10).value, rel=1e-12
        )
        block = factorizations.Factorization("block", prefix_sum(t), dense[:t, :t], t)
        assert mf_accounting.epsilon(sub, sub_spec, 2.0, 1e-5) == pytest.approx(
            mf_accounting.epsilon(block, sub_spec, 2.0, 1e-5), rel=1e-12
        )


def test_toeplitz_killed_run_resumes_byte_identical(synth, tmp_path):
    """The FilterNoise state (the filters' state vectors) is checkpointed: a run killed and resumed
    ends with the same parameters, metrics and summary as one run through."""
    cfg = _toeplitz_cfg(steps=20, min_separation=4, batch_size=15, checkpoint_every=7)
    state = killed_and_resumed(cfg, synth, tmp_path)
    assert (
        state["step"] == 7 and state["noise"]["next"] == 7 and len(state["noise"]["state"]) == 2
    )  # 2 sections


def test_amplified_banded_toeplitz_run_is_the_cyclic_poisson_event(synth):
    """banded_toeplitz with bands <= partitions under cyclic_poisson: ε of ⌈T/b⌉ Poisson-sampled
    Gaussians of σ/ζ (ζ = ‖c‖ = 1), the PLD of the pld accountant on that setting."""
    cfg = _toeplitz_cfg(
        strategy="banded_toeplitz",
        buffers=None,
        bands=3,
        sampling="cyclic_poisson",
        min_separation=4,
    )
    mech = dp_mf.prepare(RunSettings.of(cfg), 60, [24])
    setting = Setting(
        noise_multiplier=2.0,
        steps=6,
        sampling="poisson",
        neighbouring="add_remove",
        sampling_rate=20 / 60,
    )
    assert mech.plan.curves["mf"][-1] == pytest.approx(get("pld").epsilon(setting, 1e-5), rel=1e-9)


@pytest.mark.parametrize(
    "change, key",
    [
        ({"bands": 3}, "bands"),  # bands on blt
        (
            {"strategy": "banded_toeplitz", "buffers": 2, "bands": 3},
            "buffers",
        ),  # buffers on banded_toeplitz
        (
            {"strategy": "optimal", "buffers": None, "objective": "max"},
            "objective",
        ),  # objective on a dense strategy
        ({"buffers": 0}, "buffers"),
        ({"buffers": 16}, "buffers"),
        ({"buffers": 13}, "buffers"),  # 2k decays need 2k <= T = 24
        ({"strategy": "banded_toeplitz", "buffers": None, "bands": 25}, "bands"),  # bands > T
        (
            {"sampling": "cyclic_poisson", "min_separation": 4},
            "sampling",
        ),  # a BLT has T bands: no amplification
        ({"min_separation": None}, "min_separation"),  # the optimizer's b must be named
        ({"objective": "median"}, "objective"),
    ],
)
def test_toeplitz_config_rules(change, key):
    with pytest.raises(DPLabError) as err:
        _toeplitz_cfg(**change)
    assert key in err.value.key


def test_amplified_banded_toeplitz_with_more_bands_than_partitions_is_refused_before_training(
    synth, tmp_path
):
    cfg = _toeplitz_cfg(
        strategy="banded_toeplitz",
        buffers=None,
        bands=5,
        sampling="cyclic_poisson",
        min_separation=4,
    )
    with pytest.raises(DPLabError) as err:
        loop.train(RunSettings.of(cfg), synth, tmp_path)
    assert err.value.key == "bands" and not any(tmp_path.iterdir())


def test_saved_toeplitz_factorization_is_what_the_pipeline_plans_and_train_loads(
    synth, tmp_path, capsys
):
    """The factorization job's `dplab mf ... --out` writes the file the run loads (key: strategy, T,
    buffers, objective, b); training with it gives the summary of training without; a file optimized
    for another objective is refused with the command that writes the right one."""
    from dplab import jobs
    from dplab.schemas import validate

    cfg = _toeplitz_cfg()
    config = {
        "datasets": {
            "s": {"kind": "synthetic", "train_size": 60, "test_size": 20, "dim": 5, "classes": 3}
        },
        "runs": {"r": {k: v for k, v in cfg.items() if v is not None and k != "device"}},
    }
    (job,) = jobs.plan(validate(config)).of("factorization").values()
    assert job.name == "blt_T24_k2_mean_s12"
    assert (
        job.params["args"]
        == "--strategy blt --steps 24 --buffers 2 --objective mean --min-separation 12"
    )
    path = tmp_path / "mf" / f"{job.name}.npz"
    _dplab_mf(capsys, *job.params["args"].split(), "--out", str(path))
    run = RunSettings.of(cfg)
    fact = dp_mf.load_factorization(run, tmp_path / "mf")
    np.testing.assert_array_equal(fact.coefficients, dp_mf.build_factorization(run).coefficients)
    a = loop.train(RunSettings.of(cfg), synth, tmp_path / "a", factorization=fact)
    b = loop.train(RunSettings.of(cfg), synth, tmp_path / "b")
    assert a.text() == b.text()
    _dplab_mf(capsys, *job.params["args"].replace("mean", "max").split(), "--out", str(path))
    with pytest.raises(
        DPLabError,
        match="holds the factorization blt_T24_k2_max_s12; the run needs "
        "blt_T24_k2_mean_s12: write it with `dplab mf --strategy blt",
    ):
        dp_mf.load_factorization(run, tmp_path / "mf")


def test_correlated_noise_with_adam_keeps_the_mf_claim_and_moves_other_parameters(synth, tmp_path):
    """dp_mf with another optimizer (docs/matrix_factorization.md, "With another optimizer"): the
    same σ and mf ε (post-processing of the released noisy gradients), other parameters."""
    sgd = loop.train(RunSettings.of(_cfg()), synth, tmp_path / "sgd").as_dict()
    adam = loop.train(
        RunSettings.of(_cfg(optimizer="adam", lr=0.05)), synth, tmp_path / "adam"
    ).as_dict()
    assert (adam["epsilon"], adam["noise_multiplier"]) == (sgd["epsilon"], sgd["noise_multiplier"])
    assert (tmp_path / "sgd" / "model.pt").read_bytes() != (
        tmp_path / "adam" / "model.pt"
    ).read_bytes()


def test_checkpoint_of_the_earlier_permutation_split_is_refused():
    """A checkpoint written before the partitions were drawn per record holds ``parts`` (batches
    cut from one permutation, not what the ε covers under add_remove): resuming from it is
    refused, naming the checkpoint; the current state round-trips."""
    sampler = dp_mf.SpecSampler(mf_accounting.MinSeparation(4, 12, 20))
    sampler.sample(1, torch.Generator().manual_seed(0))
    with pytest.raises(DPLabError) as err:
        dp_mf.SpecSampler(sampler.spec).load_state_dict({"parts": sampler.parts})
    assert err.value.key == "checkpoint" and "delete" in str(err.value)
    again = dp_mf.SpecSampler(sampler.spec)
    again.load_state_dict(sampler.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(again.parts, sampler.parts))


@pytest.fixture(scope="module")
def saved_blt(tmp_path_factory):
    """The file the pipeline writes for :func:`_toeplitz_cfg`'s run, and the command writing it."""
    args = "--strategy blt --steps 24 --buffers 2 --objective mean --min-separation 12"
    path = tmp_path_factory.mktemp("cache") / "blt_T24_k2_mean_s12.npz"
    saved.save(dp_mf.build_factorization(RunSettings.of(_toeplitz_cfg())), path)
    return path, f"dplab mf {args} --out"


@pytest.mark.parametrize(
    "change",
    [
        {"coefficients": 0.01},
        {"coefficients": 100.0},
        {"section_numerators": None, "section_denominators": None},
    ],
)
def test_a_saved_blt_whose_noise_and_epsilon_disagree_is_refused(saved_blt, tmp_path, change):
    """Coefficients scaled (the ε of another C: 0.027 or 5426 instead of 4.377 with the same noise,
    before) or the filter sections swapped (the noise of another C): refused at load, before
    training, naming the command."""
    source, command = saved_blt
    with np.load(source) as f:
        arrays = dict(f)
    for key, factor in change.items():
        arrays[key] = arrays[key] * factor if factor is not None else arrays[key][::-1].copy()
    np.savez(tmp_path / source.name, **arrays)
    with pytest.raises(DPLabError) as err:
        dp_mf.load_factorization(RunSettings.of(_toeplitz_cfg()), tmp_path)
    assert f"`{command} {tmp_path / source.name}`" in str(err.value) and "\n" not in str(err.value)
    np.savez(tmp_path / source.name, **dict(np.load(source)))
    dp_mf.load_factorization(RunSettings.of(_toeplitz_cfg()), tmp_path)  # the file as written loads
