"""pabi with a reshuffled partition: the worst participation pattern, by brute force."""

import itertools
import json

import numpy as np
import pytest
from scipy.optimize import minimize

from dplab.training.settings import RunSettings
from dplab.accounting import Setting, get
from dplab.accounting.pabi import worst_shift_cost
from dplab.cli import main
from dplab.training import data
from dplab.training.resolve import resolve_run
from dplab.training.methods import update_of
from dplab.training.privacy import plan


def best_shift_cost(visits: np.ndarray) -> float:
    """000 Thm VI.1 for one pattern (s_t = 1 at the visits, 0 elsewhere): min Σ a_t² over real
    a_t with z_t = Σ_{i≤t}(s_i − a_i) ≥ 0 for t < K and z_K = 0, solved as a generic QP."""
    total = np.cumsum(visits)
    if total[-1] == 0:
        return 0.0
    k = len(visits)
    lower = np.tril(np.ones((k, k)))[:-1]
    constraints = [
        {"type": "eq", "fun": lambda a: a.sum() - total[-1], "jac": lambda a: np.ones((1, k))}
    ]
    if k > 1:
        constraints.append(
            {"type": "ineq", "fun": lambda a: total[:-1] - lower @ a, "jac": lambda a: -lower}
        )
    res = minimize(
        lambda a: a @ a,
        visits.astype(float),
        jac=lambda a: 2 * a,
        constraints=constraints,
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert res.success, res.message
    return float(res.fun)


def patterns(k: int, q: int, reshuffle: bool):
    """Every participation pattern of one record in K steps of Q disjoint batches per epoch: one
    visit per epoch at position p_e (the same p for every epoch unless reshuffled)."""
    epochs = -(-k // q)
    choices = (
        itertools.product(range(q), repeat=epochs)
        if reshuffle
        else ((p,) * epochs for p in range(q))
    )
    for positions in choices:
        s = np.zeros(k)
        for e, p in enumerate(positions):
            if e * q + p < k:
                s[e * q + p] = 1
        yield s


@pytest.mark.parametrize("reshuffle", [False, True])
def test_closed_form_is_the_worst_pattern_by_brute_force(reshuffle):
    """Over every pattern (Q ≤ 4 batches, K ≤ 9 steps), the largest optimal Σa_t² equals
    worst_shift_cost; reshuffling is never better than the fixed order, and strictly worse when
    the last epoch is not full."""
    for q in range(1, 5):
        for k in range(1, 10):
            worst = max(best_shift_cost(s) for s in patterns(k, q, reshuffle))
            assert worst == pytest.approx(
                float(worst_shift_cost(k, q, reshuffle)), rel=1e-6, abs=1e-9
            ), (q, k)
            fixed = float(worst_shift_cost(k, q, False))
            assert worst >= fixed - 1e-9
            if reshuffle and q > 1 and k > q and k % q:
                assert worst > fixed + 1e-6


def _setting(**kw):
    base = dict(
        noise_multiplier=2.0,
        steps=21,
        sampling="shuffle",
        neighbouring="replace_one",
        batch_size=50,
        dataset_size=1000,
        lr=0.1,
        smoothness=4.0,
        lipschitz=1.0,
        clip=1.0,
    )
    return Setting(**{**base, **kw})


def test_reshuffled_partition_gets_the_worst_pattern_bound():
    """n = 1000, b = 50 (Q = 20), T = 21: the fixed order's ε is the same as at T = 25 (two visits,
    20 steps apart); reshuffled, the two visits can be steps 20 and 21, which compose with no
    amplification: exactly the ε of two steps on a single batch (Q = 1)."""
    pabi = get("pabi")
    fixed = pabi.epsilon_curve(_setting(), 1e-5, [21, 25])
    assert fixed[0] == pytest.approx(fixed[1])
    shuffled = pabi.epsilon_curve(_setting(reshuffle=True), 1e-5, [21, 25, 40])
    assert shuffled[0] > shuffled[1] > fixed[1]
    two_steps = pabi.epsilon(_setting(steps=2, dataset_size=50), 1e-5)
    assert shuffled[0] == pytest.approx(two_steps, rel=1e-12)
    assert shuffled[2] == pytest.approx(
        pabi.epsilon(_setting(steps=40), 1e-5), rel=1e-12
    )  # full epochs: same


def test_reshuffle_only_with_shuffle_sampling():
    from dplab.errors import DPLabError

    with pytest.raises(DPLabError, match="reshuffle"):
        Setting(noise_multiplier=1.0, sampling_rate=0.1, steps=3, reshuffle=True)


def test_cli_threads_reshuffle(capsys):
    args = [
        "epsilon",
        "--accountant",
        "pabi",
        "--delta",
        "1e-5",
        "--noise-multiplier",
        "2",
        "--steps",
        "21",
        "--sampling",
        "shuffle",
        "--neighbouring",
        "replace_one",
        "--batch-size",
        "50",
        "--dataset-size",
        "1000",
        "--lr",
        "0.1",
        "--smoothness",
        "4",
        "--lipschitz",
        "1",
        "--clip",
        "1",
    ]
    assert main(args) == 0
    fixed = json.loads(capsys.readouterr().out)
    assert main([*args, "--reshuffle"]) == 0
    shuffled = json.loads(capsys.readouterr().out)
    assert shuffled["setting"]["reshuffle"] is True and "reshuffle" not in fixed["setting"]
    assert shuffled["epsilon"] == pytest.approx(get("pabi").epsilon(_setting(reshuffle=True), 1e-5))
    assert shuffled["epsilon"] > fixed["epsilon"]
    assert (
        main(
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--delta",
                "1e-5",
                "--noise-multiplier",
                "1",
                "--steps",
                "3",
                "--sampling-rate",
                "0.1",
                "--reshuffle",
            ]
        )
        == 2
    )


def test_training_run_with_reshuffle_claims_the_reshuffled_bound():
    """A dp_sgd_fixed_batches run with reshuffle: true records it in its setting and reports the
    worst-pattern ε (today's code reported the fixed-order bound)."""
    cfg_data = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 1000, "test_size": 10, "dim": 3, "feature_norm": 1.0},
        "s",
    )
    train, _, info = data.prepare(cfg_data, "s")
    run = resolve_run(
        {
            "method": "dp_sgd_fixed_batches",
            "dataset": "s",
            "batch_size": 50,
            "steps": 21,
            "clip": 3.0,
            "lr": 0.1,
            "noise_multiplier": 2.0,
            "neighbouring": "replace_one",
            "reshuffle": True,
            "accountants": ["pabi"],
        }
    )
    claim = plan(
        RunSettings.of(run),
        update_of(RunSettings.of(run)),
        1000,
        50,
        3 * 2 + 2,
        info,
        [21],
        train["x"],
    )
    assert claim.setting.reshuffle is True
    assert claim.curves["pabi"][0] == pytest.approx(get("pabi").epsilon(claim.setting, 1e-5))
    assert claim.curves["pabi"][0] > get("pabi").epsilon(
        claim.setting.replace(reshuffle=False), 1e-5
    )
