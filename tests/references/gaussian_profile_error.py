"""The rounding error of dplab's Gaussian privacy profile against 60-digit mpmath, which sets
:data:`dplab.accounting.gaussian.PROFILE_PAD`.

Usage: PYTHONPATH=src python tests/references/gaussian_profile_error.py [LOG10_MU_LO LOG10_MU_HI
EPS_MAX N SEED] (defaults -3 3 1e4 20000 1: μ log-uniform in [1e-3, 1e3], c = ε/μ − μ/2 uniform in
[−μ/2, 38] or, for a fifth of the points, near 0; a twentieth at ε = 0; only ε ≤ EPS_MAX and exact
δ ≥ 1e-300 kept). Prints, over the kept points, the largest error of the unpadded difference
Φ(−c) − e^ε Φ(−c − μ) (:func:`dplab.accounting.gaussian.profile_terms`) relative to the exact δ and
in units of ulp of the error scale (the pad's unit), the largest (exact − padded)/exact, which must
be < 0, and the largest overshoot at δ ≤ ½. For comparison, the same relative error of the former
ndtr difference ndtr(−c) − e^{ε + log_ndtr(−c − μ)}.
"""

from __future__ import annotations

import sys
import time

import mpmath
import numpy as np
from scipy.special import log_ndtr, ndtr

from dplab.accounting.gaussian import gaussian_delta, profile_terms

mpmath.mp.dps = 60
ULP = np.finfo(float).eps


def exact_delta(epsilon: float, mu: float) -> mpmath.mpf:
    """Balle & Wang 2018, Thm 8 at 60 digits, at the float inputs exactly."""
    e, m = mpmath.mpf(epsilon), mpmath.mpf(mu)
    return mpmath.ncdf(m / 2 - e / m) - mpmath.exp(e) * mpmath.ncdf(-m / 2 - e / m)


def grid(lo: float, hi: float, eps_max: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = 10 ** rng.uniform(lo, hi, n)
    c = rng.uniform(-mu / 2, 38.0)
    near0 = rng.uniform(size=n) < 0.2
    c = np.where(near0, rng.uniform(-1, 1, n) * np.minimum(mu / 2, 1), c)
    eps = np.where(rng.uniform(size=n) < 0.05, 0.0, mu * (c + mu / 2))
    keep = (eps >= 0) & (eps <= eps_max)
    return eps[keep], mu[keep]


def relative(exact: list, values) -> list:
    """(exact − value)/exact at 60 digits: positive where the value is below the exact δ."""
    return [(x - mpmath.mpf(float(v))) / x for x, v in zip(exact, values)]


def main(lo=-3.0, hi=3.0, eps_max=1e4, n=20000, seed=1) -> None:
    start = time.time()
    eps, mu = grid(float(lo), float(hi), float(eps_max), int(n), int(seed))
    exact = [exact_delta(e, m) for e, m in zip(eps, mu)]
    kept = np.array([x >= mpmath.mpf(1e-300) for x in exact])
    eps, mu, exact = eps[kept], mu[kept], [x for x, k in zip(exact, kept) if k]
    first, second, scale = profile_terms(eps, mu)
    low = np.array(
        [
            float(x - mpmath.mpf(float(a)) + mpmath.mpf(float(b)))
            for x, a, b in zip(exact, first, second)
        ]
    )
    rel = low / np.array([float(x) for x in exact])
    units = low / (scale * ULP)
    pad = relative(exact, gaussian_delta(eps, mu))
    below = [r for r, x in zip(pad, exact) if x < 1]
    over = -min(r for r, x in zip(pad, exact) if x <= 0.5)
    ones = len(exact) - len(below)
    c = eps / mu - mu / 2
    former = float(max(relative(exact, ndtr(-c) - np.exp(eps + log_ndtr(-c - mu)))))
    print(
        f"{len(eps)} points, mu in [{mu.min():.3g}, {mu.max():.3g}], eps <= {eps.max():.4g}, "
        f"delta >= {min(float(x) for x in exact):.3g} ({time.time() - start:.0f} s)"
    )
    print(
        f"unpadded: max relative error {np.abs(rel).max():.3g} (max below exact {rel.max():.3g}); "
        f"max (exact - unpadded)/scale = {units.max():.2f} ulp"
    )
    print(
        f"padded: max (exact - padded)/exact = {mpmath.nstr(max(below), 3)} (must be < 0: never"
        f" below; {ones} points left out where the exact delta is 1 to 60 digits and ours is"
        " clipped at 1)"
    )
    print(f"padded: largest relative overshoot where delta <= 1/2: {float(over):.3g}")
    print(f"former ndtr difference: max relative error below exact {former:.3g}")


if __name__ == "__main__":
    main(*sys.argv[1:])
