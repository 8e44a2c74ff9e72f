"""Issue 15, point 2: every accountant answers in bounded time and memory or refuses up front.

Each case of the issue, run through ``dplab.cli.main`` under a time limit (:func:`limit`: a
generous one, it only catches hangs): a refusal is exit code 2 and one line naming the key; an
answer is checked against an exact value or dp_accounting's own.
"""

from __future__ import annotations

import contextlib
import json
import math
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
from dplab.accounting.dp_accounting_adapters import PLD_BINS, PLD_DISC_MAX, PLD_STEP_BINS, absl_warnings
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dplab.accounting.setting import Setting
from dplab.cli import main
from dplab.mf.workload import MEMORY_MAX

#: seconds a case may take: far above any answer or refusal, far below the hangs of the issue
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
    refused(["epsilon", "--accountant", "rdp", "--noise-multiplier", sigma, *POISSON, "--delta", "1e-5"],
            "noise_multiplier", capfd, f"[{low:g}, {high:g}]")


def test_rdp_at_the_edges_of_its_sigma_range_answers_a_valid_bound(capfd):
    """Inside the range, at both ends and between: a finite, non-negative ε that grows as σ falls."""
    low, high, _ = LIMITS["noise_multiplier"]
    eps = []
    for sigma in (high, 1.0, low):
        code, out, _ = dplab(["epsilon", "--accountant", "rdp", "--noise-multiplier", repr(sigma), *POISSON,
                              "--delta", "1e-5"], capfd)
        assert code == 0 and math.isfinite(out["epsilon"]) and out["epsilon"] >= 0
        eps.append(out["epsilon"])
    assert eps[0] <= eps[1] <= eps[2]


def test_gaussian_analytic_sigma_at_huge_epsilon_refuses(capfd):
    refused(["sigma", "--accountant", "gaussian_analytic", "--sensitivity", "1", "--epsilon", "1e300", "--delta", "1e-5"],
            "epsilon", capfd, f"{EPSILON_MAX:g}")


def test_gaussian_analytic_sigma_at_the_largest_epsilon_meets_the_exact_profile(capfd):
    code, out, _ = dplab(["sigma", "--accountant", "gaussian_analytic", "--sensitivity", "1",
                          "--epsilon", repr(EPSILON_MAX), "--delta", "1e-5"], capfd)
    assert code == 0
    assert gaussian_delta(EPSILON_MAX, 1 / out["noise_multiplier"]) <= 1e-5 * (1 + 1e-6)


ASOODEH = ["epsilon", "--accountant", "asoodeh_projected", "--noise-multiplier", "2", "--dataset-size", "100",
           "--batch-size", "10", "--steps", "100", "--lr", "0.1", "--clip", "1", "--sampling", "without_replacement",
           "--neighbouring", "replace_one", "--delta", "1e-5"]


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
    refused(["epsilon", "--accountant", accountant, "--noise-multiplier", "1", "--sampling-rate", "0.01",
             "--steps", "99999999999999999999999", "--delta", "1e-5"], "steps", capfd, f"{LIMITS['steps'][1]:g}")


def test_mf_optimal_at_100000_steps_refuses_before_allocating(capfd):
    from dplab.commands import mf  # noqa: F401 - imports are not what is measured
    from dplab.mf import accounting, factorizations, workload  # noqa: F401

    tracemalloc.start()
    try:
        line = refused(["mf", "--strategy", "optimal", "--steps", "100000"], "steps", capfd, "MEMORY_MAX")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, f"peak {peak / 2**20:.0f} MiB traced before the refusal"
    most = int(line.split("T must be <= ")[1])
    assert 6 * 8 * most**2 <= MEMORY_MAX < 6 * 8 * (most + 1) ** 2  # the largest T it names fits


@pytest.mark.parametrize("sigma", ["0.03", "0.01"])
def test_pld_at_tiny_sigma_refuses_and_rdp_answers(sigma, capfd):
    refused(["epsilon", "--accountant", "pld", "--noise-multiplier", sigma, *POISSON, "--delta", "1e-5"],
            "noise_multiplier", capfd, "PLD_STEP_BINS", str(PLD_STEP_BINS))
    code, out, _ = dplab(["epsilon", "--accountant", "rdp", "--noise-multiplier", sigma, *POISSON,
                          "--delta", "1e-5"], capfd)  # the fallback the refusal names
    assert code == 0 and math.isfinite(out["epsilon"])


def test_pld_sigma_at_epsilon_1000_refuses_at_once_naming_rdps_sigma(capfd):
    """Refused before any PLD is built: rdp's σ for the target (0.1006) lies below pld's floor
    (0.1255 here, PLD_DISC_MAX), so pld could only return a larger σ than rdp's valid one.  The
    σ search found this after ~41 one-step PLDs near the floor (114 s on an idle core)."""
    rdp = get("rdp").sigma(Setting(sampling_rate=0.01, steps=100), 1000.0, 1e-5)
    floor = get("pld").sigma_floor(Setting(sampling_rate=0.01, steps=100))
    assert rdp < floor
    refused(["sigma", "--accountant", "pld", *POISSON, "--epsilon", "1000", "--delta", "1e-5"], "epsilon", capfd,
            f"σ = {rdp:.6g}", f"σ = {floor:.6g}")


def test_pld_sigma_floor_is_where_the_one_step_pld_fits():
    """The σ the refusal above names: the smallest whose one-step PLD fits PLD_STEP_BINS at an
    interval of at most PLD_DISC_MAX."""
    pld = get("pld")
    setting = Setting(sampling_rate=0.01, steps=100)
    floor = pld.sigma_floor(setting)
    assert pld.step_width(setting.replace(noise_multiplier=floor)) / PLD_DISC_MAX <= PLD_STEP_BINS
    assert pld.step_width(setting.replace(noise_multiplier=floor * (1 - 1e-4))) / PLD_DISC_MAX > PLD_STEP_BINS - 2


def test_pld_at_a_billion_steps_refuses_naming_steps(capfd):
    refused(["epsilon", "--accountant", "pld", "--noise-multiplier", "1", "--sampling-rate", "0.01",
             "--steps", "1000000000", "--delta", "1e-5"], "steps", capfd, "PLD_BINS", str(PLD_BINS))


@pytest.mark.parametrize("neighbouring, shift", [("add_remove", 1.0), ("replace_one", 2.0)])
@pytest.mark.parametrize("steps", [1, 1000, 10**9])
def test_pld_full_batch_is_the_exact_gaussian_of_mu_sqrt_t(neighbouring, shift, steps, capfd):
    """Full batch: T Gaussian steps are one Gaussian mechanism of μ = shift·√T/σ, at any T, at once."""
    sigma = 1000.0
    code, out, _ = dplab(["epsilon", "--accountant", "pld", "--noise-multiplier", repr(sigma), "--sampling",
                          "full_batch", "--neighbouring", neighbouring, "--steps", str(steps), "--delta", "1e-5"], capfd)
    assert code == 0
    mu = shift * math.sqrt(steps) / sigma
    assert out["epsilon"] == pytest.approx(float(gaussian_epsilon(1e-5, mu)), rel=1e-9)
    assert gaussian_delta(out["epsilon"], mu) == pytest.approx(1e-5, rel=1e-6)


def test_pld_full_batch_exact_value_is_below_dp_accountings_discretized_pld():
    """dp_accounting's pessimistic PLD of the same T Gaussian steps bounds the exact value from above."""
    sigma, steps = 2.0, 50
    exact = get("pld").epsilon(Setting(noise_multiplier=sigma, sampling="full_batch", steps=steps), 1e-5)
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(sigma), steps)
    theirs = acc.get_epsilon(1e-5)
    assert exact <= theirs <= exact * 1.01


@pytest.mark.parametrize("section, key", [("runs:\n  dp_sgd:\n    target_epsilon: 1000000.0\n", "runs.dp_sgd.target_epsilon"),
                                          ("grids:\n  privacy_utility:\n    target_epsilon: [1000000.0]\n",
                                           "grids.privacy_utility.target_epsilon.0")])
def test_run_with_target_epsilon_1e6_is_refused_before_planning(section, key, tmp_path, capfd):
    """Above EPSILON_MAX: `dplab check-config` (what Snakemake runs before planning) and `dplab train`
    both refuse, naming the key (the schema's maximum is EPSILON_MAX)."""
    config = tmp_path / "huge.yaml"
    config.write_text(section)
    refused(["check-config", "config/config.yaml", str(config)], key, capfd, f"{EPSILON_MAX:g}")
    run = {"method": "dp_sgd", "model": "logreg", "dataset": "digits", "steps": 30, "batch_size": 64, "lr": 0.5,
           "clip": 1.0, "target_epsilon": 1e6, "delta": 1e-5, "accountant": "pld"}
    refused(["train", "--run-json", json.dumps(run), "--data", str(tmp_path / "none"), "--out", str(tmp_path / "out")],
            "target_epsilon", capfd)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [
    ["--accountant", "rdp", "--noise-multiplier", "1", *POISSON, "--epsilon", "5000"],
    ["--accountant", "gaussian_analytic", "--noise-multiplier", "1", "--sensitivity", "1", "--epsilon", "1000"],
    ["--accountant", "pld", "--noise-multiplier", "1", "--sampling", "full_batch", "--steps", "1", "--epsilon", "1000"],
])
def test_delta_at_large_epsilon_is_never_zero(argv, capfd):
    """The exact δ underflows float64: the answer is δ = DELTA_FLOOR with a note, never 0.0."""
    code, out, _ = dplab(["delta", *argv], capfd)
    assert code == 0 and out["delta"] == DELTA_FLOOR > 0 and "delta_note" in out
    if "gaussian_analytic" in argv:  # where the exact value is known: it is indeed below the floor
        assert gaussian_delta(1000.0, 1.0) <= DELTA_FLOOR


def test_tiny_sampling_rate_gives_at_most_one_line_of_warnings():
    """q = 1e-16: dp_accounting logs one warning per order (a negative Rényi divergence from
    rounding); dplab prints at most one line on stderr, and an ε that is a number."""
    with absl_warnings() as warned:
        acc = rdp_privacy_accountant.RdpAccountant()
        acc.compose(dp_accounting.PoissonSampledDpEvent(1e-16, dp_accounting.GaussianDpEvent(2.0)), 100)
        acc.get_epsilon(1e-5)
    assert len(warned) > 10  # the case is one that warns
    proc = subprocess.run([sys.executable, "-m", "dplab.cli", "epsilon", "--accountant", "rdp", "--noise-multiplier",
                           "2", "--sampling-rate", "1e-16", "--steps", "100", "--delta", "1e-5"],
                          capture_output=True, text=True, timeout=SECONDS)
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
