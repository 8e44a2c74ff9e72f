"""Every accountant answers in bounded time and memory or refuses up front.

Each case, run through ``dplab.cli.main`` under a time limit (:func:`limit`: a
generous one, it only catches hangs): a refusal is exit code 2 and one line naming the key; an
answer is checked against an exact value or dp_accounting's own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import signal
import subprocess
import sys
import tracemalloc

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting import get
from dplab.accounting.base import DELTA_FLOOR, EPSILON_MAX, LIMITS
from dplab.accounting.pld_accountant import PLD_DISC_MAX, PLD_STEP_BINS
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dplab.accounting.setting import Setting
from dplab.errors import AssumptionError
from dplab.cli import main
from dplab.mf.workload import MEMORY_MAX

#: seconds a case may take: far above any answer or refusal, far below the hangs once seen
SECONDS = 30
POISSON = ["--sampling-rate", "0.01", "--steps", "100"]


@contextlib.contextmanager
def limit(what: str, seconds: int = SECONDS):
    def hang(signum, frame):
        raise TimeoutError(f"{what}: no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def dplab(argv: list[str], capfd, seconds: int = SECONDS) -> tuple[int, dict | None, str]:
    """``dplab ARGV`` in this process under :func:`limit`: (exit code, its JSON or None, stderr)."""
    capfd.readouterr()
    with limit("dplab " + " ".join(argv), seconds):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    out, err = capfd.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def refused(argv: list[str], key: str, capfd, *words: str, seconds: int = SECONDS) -> str:
    """Assert ``dplab ARGV`` exits 2 with one line naming ``key`` (and ``words``); return it."""
    code, _, err = dplab(argv, capfd, seconds)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err)
    assert f"error: {key}:" in lines[0] and "Traceback" not in err, lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("sigma", ["1e300", "1e-300"])
def test_rdp_at_extreme_sigma_refuses_naming_the_range(sigma, capfd):
    low, high, _ = LIMITS["noise_multiplier"]
    refused(
        [
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            sigma,
            *POISSON,
            "--delta",
            "1e-5",
        ],
        "noise_multiplier",
        capfd,
        f"[{low:g}, {high:g}]",
    )


def test_rdp_at_the_edges_of_its_sigma_range_answers_a_valid_bound(capfd):
    """Inside the range, at both ends and between: a finite, non-negative ε
    that grows as σ falls."""
    low, high, _ = LIMITS["noise_multiplier"]
    eps = []
    for sigma in (high, 1.0, low):
        code, out, _ = dplab(
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--noise-multiplier",
                repr(sigma),
                *POISSON,
                "--delta",
                "1e-5",
            ],
            capfd,
        )
        assert code == 0 and math.isfinite(out["epsilon"]) and out["epsilon"] >= 0
        eps.append(out["epsilon"])
    assert eps[0] <= eps[1] <= eps[2]


def test_gaussian_analytic_sigma_at_huge_epsilon_refuses(capfd):
    refused(
        [
            "sigma",
            "--accountant",
            "gaussian_analytic",
            "--sensitivity",
            "1",
            "--epsilon",
            "1e300",
            "--delta",
            "1e-5",
        ],
        "epsilon",
        capfd,
        f"{EPSILON_MAX:g}",
    )


def test_gaussian_analytic_sigma_at_the_largest_epsilon_meets_the_exact_profile(capfd):
    code, out, _ = dplab(
        [
            "sigma",
            "--accountant",
            "gaussian_analytic",
            "--sensitivity",
            "1",
            "--epsilon",
            repr(EPSILON_MAX),
            "--delta",
            "1e-5",
        ],
        capfd,
    )
    assert code == 0
    assert gaussian_delta(EPSILON_MAX, 1 / out["noise_multiplier"]) <= 1e-5 * (1 + 1e-6)


ASOODEH = [
    "epsilon",
    "--accountant",
    "asoodeh_projected",
    "--noise-multiplier",
    "2",
    "--dataset-size",
    "100",
    "--batch-size",
    "10",
    "--steps",
    "100",
    "--lr",
    "0.1",
    "--clip",
    "1",
    "--sampling",
    "without_replacement",
    "--neighbouring",
    "replace_one",
    "--delta",
    "1e-5",
]


def test_asoodeh_projected_at_huge_diameter_refuses(capfd):
    refused([*ASOODEH, "--diameter", "1e300"], "diameter", capfd, f"{LIMITS['diameter'][1]:g}")


def test_asoodeh_projected_at_the_largest_diameter_answers_or_refuses_at_once(capfd):
    """D = 1e30 (inside LIMITS): the projection barely contracts, θ is computed in log space; the
    search for ε is capped, so the answer is a clean refusal naming δ (no ε <= 1e12), not a hang."""
    code, out, _ = dplab([*ASOODEH, "--diameter", "1"], capfd)
    assert code == 0 and math.isfinite(out["epsilon"])
    refused([*ASOODEH, "--diameter", "1e30"], "delta", capfd, "1e+12")


@pytest.mark.parametrize("accountant", ["rdp", "pld", "naive"])
def test_astronomical_steps_refuse_naming_steps(accountant, capfd):
    refused(
        [
            "epsilon",
            "--accountant",
            accountant,
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "99999999999999999999999",
            "--delta",
            "1e-5",
        ],
        "steps",
        capfd,
        f"{LIMITS['steps'][1]:g}",
    )


def test_mf_optimal_at_100000_steps_refuses_before_allocating(capfd):
    from dplab.commands import mf  # noqa: F401 - imports are not what is measured
    from dplab.mf import accounting, factorizations, workload  # noqa: F401

    tracemalloc.start()
    try:
        line = refused(
            ["mf", "--strategy", "optimal", "--steps", "100000"], "steps", capfd, "MEMORY_MAX"
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, f"peak {peak / 2**20:.0f} MiB traced before the refusal"
    most = int(line.split("T must be <= ")[1])
    assert 6 * 8 * most**2 <= MEMORY_MAX < 6 * 8 * (most + 1) ** 2  # the largest T it names fits


@pytest.mark.parametrize("sigma", ["0.03", "0.01"])
def test_pld_at_tiny_sigma_refuses_and_rdp_answers(sigma, capfd):
    refused(
        [
            "epsilon",
            "--accountant",
            "pld",
            "--noise-multiplier",
            sigma,
            *POISSON,
            "--delta",
            "1e-5",
        ],
        "noise_multiplier",
        capfd,
        "PLD_STEP_BINS",
        str(PLD_STEP_BINS),
    )
    code, out, _ = dplab(
        [
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            sigma,
            *POISSON,
            "--delta",
            "1e-5",
        ],
        capfd,
    )  # the fallback the refusal names
    assert code == 0 and math.isfinite(out["epsilon"])


def test_pld_sigma_at_epsilon_1000_refuses_at_once_naming_rdps_sigma(capfd):
    """Refused before any PLD is built: rdp's σ for the target (0.1006) lies below pld's floor
    (0.1255 here, PLD_DISC_MAX), so pld could only return a larger σ than rdp's valid one.  The
    σ search found this after ~41 one-step PLDs near the floor (114 s on an idle core)."""
    rdp = get("rdp").sigma(Setting(sampling_rate=0.01, steps=100), 1000.0, 1e-5)
    floor = get("pld").sigma_floor(Setting(sampling_rate=0.01, steps=100))
    assert rdp < floor
    refused(
        ["sigma", "--accountant", "pld", *POISSON, "--epsilon", "1000", "--delta", "1e-5"],
        "epsilon",
        capfd,
        f"σ = {rdp:.6g}",
        f"σ = {floor:.6g}",
    )


def test_pld_sigma_floor_is_where_the_one_step_pld_fits():
    """The σ the refusal above names: the smallest whose one-step PLD fits PLD_STEP_BINS at an
    interval of at most PLD_DISC_MAX."""
    pld = get("pld")
    setting = Setting(sampling_rate=0.01, steps=100)
    floor = pld.sigma_floor(setting)
    assert pld.step_width(setting.replace(noise_multiplier=floor)) / PLD_DISC_MAX <= PLD_STEP_BINS
    assert (
        pld.step_width(setting.replace(noise_multiplier=floor * (1 - 1e-4))) / PLD_DISC_MAX
        > PLD_STEP_BINS - 2
    )


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_pld_at_a_billion_steps_refuses_naming_steps_and_who_answers(neighbouring, capfd):
    """σ = 3, q = 0.01, T = 1e9: the certified window would hold ~2e7 bins.  The refusal
    points to an accountant that answers the setting, with its answer (rdp's ε, checked here),
    or says that none here does (replace_one with Poisson sampling: every other accountant
    refuses it, checked here)."""
    setting = [
        "--noise-multiplier",
        "3",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000000000",
        "--delta",
        "1e-5",
        "--neighbouring",
        neighbouring,
    ]
    line = refused(["epsilon", "--accountant", "pld", *setting], "steps", capfd, "WINDOW_MAX")
    others = {
        name: dplab(["epsilon", "--accountant", name, *setting], capfd)[1]
        for name in ("rdp", "moments", "naive", "advanced", "kairouz", "rdp_closed_form")
    }
    if neighbouring == "replace_one":
        assert "no other accountant here covers" in line and not any(others.values())
    else:
        assert f"rdp gives ε ≤ {others['rdp']['epsilon']:.6g}" in line


def sum_test_delta(sigma: float, q: float, steps: int, epsilon: float) -> float:
    """The exact δ(ε) of the sum of the T outputs (a post-processing, so a lower bound on the
    mechanism's δ(ε)) for the record's removal: Σ_k Bin(T, q)(k)·N(k, Tσ²) against N(0, Tσ²)."""
    from scipy import optimize, special, stats

    s = sigma * math.sqrt(steps)
    k = np.arange(
        max(0, int(steps * q - 12 * math.sqrt(steps * q) - 12)),
        int(steps * q + 12 * math.sqrt(steps * q) + 13),
    )
    log_b = stats.binom.logpmf(k, steps, q)
    log_ratio = lambda y: special.logsumexp(log_b + (2 * k * y - k * k) / (2 * s * s))  # noqa: E731
    cut = optimize.brentq(lambda y: log_ratio(y) - epsilon, -50 * s, 50 * s + k[-1], xtol=1e-12 * s)
    upper = special.logsumexp(log_b + special.log_ndtr((k - cut) / s))
    return math.exp(upper) - math.exp(epsilon + special.log_ndtr(-cut / s))


@pytest.mark.parametrize("steps", [10**7, 10**8])
def test_pld_answers_at_large_sigma_small_q_long_runs_between_a_lower_bound_and_rdp(steps, capfd):
    """σ = 20, q = 1e-4, T = 1e7 and 1e8 (docs/reliability.md): pld refused (its rounding allowance
    carried a spurious √N and three bins of 1e-4 inflated one step's loss 4-fold).  Its ε must hold
    for the sum of the outputs (exact δ at pld's ε ≤ δ: a certified lower bound on the true ε) and
    not exceed rdp's (another upper bound; pld is the tighter accountant)."""
    argv = [
        "--noise-multiplier",
        "20",
        "--sampling-rate",
        "1e-4",
        "--steps",
        str(steps),
        "--delta",
        "1e-5",
    ]
    code, out, err = dplab(["epsilon", "--accountant", "pld", *argv], capfd)
    assert code == 0, err
    rdp = dplab(["epsilon", "--accountant", "rdp", *argv], capfd)[1]["epsilon"]
    assert sum_test_delta(20.0, 1e-4, steps, out["epsilon"]) <= 1e-5 and out["epsilon"] <= rdp
    assert (
        sum_test_delta(20.0, 1e-4, steps, 0.98 * out["epsilon"]) > 1e-5
    )  # and pld is tight: within 2%


@pytest.mark.slow
def test_pld_sigma_at_three_hundred_million_steps_lies_between_a_lower_bound_and_rdp(capfd):
    """`dplab sigma --accountant pld --sampling-rate 1e-4 --steps 3e8 --epsilon 1 --delta 1e-5` said
    no σ ≤ 1e7 reaches ε = 1 (rdp: 7.04); now σ = 6.598 (~10 ε evaluations of ~5 s each), whose sum
    of outputs meets (1, 1e-5) exactly and which is below rdp's σ."""
    argv = ["--sampling-rate", "1e-4", "--steps", "300000000", "--epsilon", "1", "--delta", "1e-5"]
    code, out, err = dplab(["sigma", "--accountant", "pld", *argv], capfd, seconds=600)
    assert code == 0, err
    rdp = dplab(["sigma", "--accountant", "rdp", *argv], capfd)[1]["noise_multiplier"]
    assert (
        sum_test_delta(out["noise_multiplier"], 1e-4, 300_000_000, 1.0) <= 1e-5
        and out["noise_multiplier"] < rdp
    )


@pytest.mark.parametrize("neighbouring, shift", [("add_remove", 1.0), ("replace_one", 2.0)])
@pytest.mark.parametrize("steps", [1, 1000, 10**9])
def test_pld_full_batch_is_the_exact_gaussian_of_mu_sqrt_t(neighbouring, shift, steps, capfd):
    """Full batch: T Gaussian steps are one Gaussian mechanism of
    μ = shift·√T/σ, at any T, at once."""
    sigma = 1000.0
    code, out, _ = dplab(
        [
            "epsilon",
            "--accountant",
            "pld",
            "--noise-multiplier",
            repr(sigma),
            "--sampling",
            "full_batch",
            "--neighbouring",
            neighbouring,
            "--steps",
            str(steps),
            "--delta",
            "1e-5",
        ],
        capfd,
    )
    assert code == 0
    mu = shift * math.sqrt(steps) / sigma
    assert out["epsilon"] == pytest.approx(float(gaussian_epsilon(1e-5, mu)), rel=1e-9)
    assert gaussian_delta(out["epsilon"], mu) == pytest.approx(1e-5, rel=1e-6)


def test_pld_full_batch_exact_value_is_below_dp_accountings_discretized_pld():
    """dp_accounting's pessimistic PLD of the same T Gaussian steps bounds the
    exact value from above."""
    sigma, steps = 2.0, 50
    exact = get("pld").epsilon(
        Setting(noise_multiplier=sigma, sampling="full_batch", steps=steps), 1e-5
    )
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(sigma), steps)
    theirs = acc.get_epsilon(1e-5)
    assert exact <= theirs <= exact * 1.01


@pytest.mark.parametrize(
    "section, key",
    [
        ("runs:\n  dp_sgd:\n    target_epsilon: 1000000.0\n", "runs.dp_sgd.target_epsilon"),
        (
            "grids:\n  privacy_utility:\n    target_epsilon: [1000000.0]\n",
            "grids.privacy_utility.target_epsilon[0]",
        ),
    ],
)
def test_run_with_target_epsilon_1e6_is_refused_before_planning(section, key, tmp_path, capfd):
    """Above EPSILON_MAX: `dplab check-config` (what Snakemake runs before planning) and
    `dplab train` both refuse, naming the key (the schema's maximum is EPSILON_MAX)."""
    config = tmp_path / "huge.yaml"
    config.write_text(section)
    refused(["check-config", "config/config.yaml", str(config)], key, capfd, f"{EPSILON_MAX:g}")
    run = {
        "method": "dp_sgd",
        "model": "logreg",
        "dataset": "digits",
        "steps": 30,
        "batch_size": 64,
        "lr": 0.5,
        "clip": 1.0,
        "target_epsilon": 1e6,
        "delta": 1e-5,
        "accountant": "pld",
    }
    refused(
        [
            "train",
            "--run-json",
            json.dumps(run),
            "--data",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "out"),
        ],
        "target_epsilon",
        capfd,
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--accountant", "rdp", "--noise-multiplier", "1", *POISSON, "--epsilon", "5000"],
        [
            "--accountant",
            "gaussian_analytic",
            "--noise-multiplier",
            "1",
            "--sensitivity",
            "1",
            "--epsilon",
            "1000",
        ],
        [
            "--accountant",
            "pld",
            "--noise-multiplier",
            "1",
            "--sampling",
            "full_batch",
            "--steps",
            "1",
            "--epsilon",
            "1000",
        ],
    ],
)
def test_delta_at_large_epsilon_is_never_zero(argv, capfd):
    """The exact δ underflows float64: the answer is δ = DELTA_FLOOR with a note, never 0.0."""
    code, out, _ = dplab(["delta", *argv], capfd)
    assert code == 0 and out["delta"] == DELTA_FLOOR > 0 and "delta_note" in out
    if "gaussian_analytic" in argv:  # where the exact value is known: it is indeed below the floor
        assert gaussian_delta(1000.0, 1.0) <= DELTA_FLOOR


@contextlib.contextmanager
def absl_warnings():
    """The messages of the warnings dp_accounting logs through absl inside the block (kept off
    stderr)."""
    caught: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        caught.append(record.getMessage())
        return False

    logging.getLogger("absl").addFilter(keep)
    try:
        yield caught
    finally:
        logging.getLogger("absl").removeFilter(keep)


def test_tiny_sampling_rate_gives_at_most_one_line_of_warnings():
    """q = 1e-16: dp_accounting logs one warning per order (a negative Rényi divergence from
    rounding); dplab prints at most one line on stderr, and an ε that is a number."""
    with absl_warnings() as warned:
        acc = rdp_privacy_accountant.RdpAccountant()
        acc.compose(
            dp_accounting.PoissonSampledDpEvent(1e-16, dp_accounting.GaussianDpEvent(2.0)), 100
        )
        acc.get_epsilon(1e-5)
    assert len(warned) > 10  # the case is one that warns
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dplab.cli",
            "epsilon",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "2",
            "--sampling-rate",
            "1e-16",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 1, proc.stderr
    assert math.isfinite(json.loads(proc.stdout)["epsilon"])


@pytest.mark.parametrize("q", [1e-16, 1e-8, 1e-3, 0.5])
@pytest.mark.parametrize("sigma", [0.1, 0.5, 2.0, 30.0])
def test_rdp_float_safe_log_moments_never_below_dp_accountings(q, sigma):
    """The float-safe ρ(α) of one step replaces dp_accounting's negative and infinite values; where
    dp_accounting's is positive and finite, ours is never below it — or below the same step without
    sampling, α/(2σ²), a proven bound that dp_accounting's series overshoots at some fractional
    orders (σ = 30, q = 0.5) — and never above that bound."""
    setting = Setting(noise_multiplier=sigma, sampling_rate=q, steps=1)
    orders, ours = get("rdp").one_step_rdp(setting)
    acc = rdp_privacy_accountant.RdpAccountant()
    with absl_warnings():
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)))
    theirs = np.asarray(acc._rdp, dtype=float)  # noqa: SLF001
    assert np.all(np.isfinite(ours)) and np.all(ours > 0)
    unsampled = orders / (2 * sigma**2)
    usable = np.isfinite(theirs) & (theirs > 0)
    assert np.all(ours[usable] >= np.minimum(theirs[usable], unsampled[usable]) * (1 - 1e-12))
    assert np.all(ours <= unsampled * (1 + 1e-12))


def test_advanced_composition_is_never_above_basic_composition(capfd):
    """σ = 0.3, q = 0.99, T = 1: advanced printed ε = 3.8e9 (its term Tε_s(e^ε_s − 1)), above
    EPSILON_MAX; basic composition holds for the same steps, so advanced answers the smaller of the
    two: naive's 19.11, valid against the exact δ of the one step (normal CDFs) and within 1e-3 of
    the exact ε (T = 1: basic composition is exact), and within EPSILON_MAX."""
    from test_certified_pld_rdp import exact_one_step_delta

    argv = [
        "--noise-multiplier",
        "0.3",
        "--sampling-rate",
        "0.99",
        "--steps",
        "1",
        "--delta",
        "1e-5",
    ]
    advanced = dplab(["epsilon", "--accountant", "advanced", *argv], capfd)[1]["epsilon"]
    assert (
        advanced
        == dplab(["epsilon", "--accountant", "naive", *argv], capfd)[1]["epsilon"]
        <= EPSILON_MAX
    )
    assert exact_one_step_delta(0.3, 0.99, "add_remove", advanced) <= 1e-5
    assert exact_one_step_delta(0.3, 0.99, "add_remove", advanced - 1e-3) > 1e-5
    delta = dplab(["delta", "--accountant", "advanced", *argv[:-2], "--epsilon", "19.2"], capfd)[1][
        "delta"
    ]
    assert exact_one_step_delta(0.3, 0.99, "add_remove", 19.2) <= delta <= 1e-5


def test_a_full_batch_risk_target_needing_sigma_beyond_its_range_is_refused(capfd):
    """Full batch, T = 1e15, advantage 1e-12: the closed form asks σ = √T/μ ≈ 1.3e19 > SIGMA_MAX; it
    was returned as the answer."""
    from scipy.special import ndtri

    sigma = math.sqrt(1e15) / (2 * ndtri((1 + 1e-12) / 2))
    assert sigma > LIMITS["noise_multiplier"][1]
    refused(
        [
            "sigma",
            "--accountant",
            "pld",
            "--sampling",
            "full_batch",
            "--steps",
            "1000000000000000",
            "--advantage",
            "1e-12",
        ],
        "noise_multiplier",
        capfd,
        f"{sigma:.6g}",
    )


@pytest.fixture(scope="module")
def plds() -> dict:
    """The T-fold PLDs that :func:`kept_plds` composed, by setting, for the module's tests."""
    return {}


@pytest.fixture
def kept_plds(plds, monkeypatch):
    """risk.composed_pld keeping each PLD it composes (in ``plds``) during the test: the tests below
    search the same σ (the same T-fold PLDs, ~3 s each) for two targets, and check the level at
    the floor that the search composed; a PLD is a function of its setting."""
    from dplab.accounting import risk

    compose = risk.composed_pld

    def composed_pld(settings):
        if repr(settings) not in plds:
            plds[repr(settings)] = compose(settings)
        return plds[repr(settings)]

    monkeypatch.setattr(risk, "composed_pld", composed_pld)


@pytest.mark.slow
@pytest.mark.parametrize("target, key", [(["--advantage", "0.6338"], "advantage")])
def test_a_risk_target_met_at_pld_s_sigma_floor_is_refused(target, key, capfd, kept_plds):
    """q = 0.01, T = 100: σ = 0.1255, the smallest σ pld resolves, already has advantage 0.63370,
    below the target and below 1 − 0.99¹⁰⁰ = 0.63397, what no σ exceeds: the floor was returned as
    the calibrated σ, though the smallest σ meeting it lies below.  Refused, naming the floor and
    the level it reaches (checked against the risk reading there); ~8 s of PLDs (kept_plds)."""
    from dplab.accounting import risk

    floor = get("pld").sigma_floor(Setting(noise_multiplier=1.0, sampling_rate=0.01, steps=100))
    line = refused(
        ["sigma", "--accountant", "pld", "--sampling-rate", "0.01", "--steps", "100", *target],
        key,
        capfd,
        f"σ = {floor:.6g}",
        seconds=120,
    )
    at_floor = Setting(noise_multiplier=floor, sampling_rate=0.01, steps=100)
    level = risk.level(
        at_floor, 0.01 if key == "tpr" else None, 0.999999999 if key == "advantage" else None
    )
    assert f"{level:.4g}" in line and level < float(target[1])


def test_a_target_below_the_bounds_floor_is_refused_naming_the_floor():
    """moments' orders stop at λ = 32, so its ε is at least ln(1/δ)/32 = 0.8208 at δ = 3.913e-12
    whatever σ: the refusal says so (it gave no reason), where rdp answers."""
    setting = Setting(sampling_rate=0.00196, steps=979)
    with pytest.raises(AssumptionError, match=r"gives ε = 0\.82\d+, this bound's floor") as err:
        get("moments").sigma(setting, 0.5969, 3.913e-12)
    floor = float(re.search(r"gives ε = ([0-9.]+)", str(err.value))[1])
    assert floor == pytest.approx(math.log(1 / 3.913e-12) / 32, rel=1e-4)
    assert get("rdp").sigma(setting, 0.5969, 3.913e-12) < 10


@pytest.mark.parametrize("value,shown", [(1.0000001, "got 1.0000001"), (10**4 + 1, "got 10001")])
def test_a_value_outside_a_limit_is_shown_with_every_digit(value, shown):
    """α = 1.0000001 < 1.01 was refused as "got 1" (format :g)."""
    from dplab.accounting.base import ResolutionError

    key = "alpha" if isinstance(value, float) else "steps"
    acc = get("langevin") if key == "alpha" else get("asoodeh_regularized")
    with pytest.raises(ResolutionError) as err:
        acc.check_limit(key, value)
    assert str(err.value).split("; ")[-1].startswith(shown)
