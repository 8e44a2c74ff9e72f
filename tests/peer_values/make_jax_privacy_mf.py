"""Writes jax_privacy_mf.json: jax_privacy 2.0's banded Toeplitz optimum and amplified-BandMF ε on
settings of our choosing, the peer values tests/test_mf_toeplitz.py checks dplab against.

    pip install -c constraints.txt 'dplab[mfpeer]'   # jax_privacy (CPU jax)
    python tests/peer_values/make_jax_privacy_mf.py

Banded Toeplitz errors: ``optimize_banded_toeplitz(T, bands, reduction_fn=jnp.mean |
jnp.max)`` (its default 250 L-BFGS steps), evaluated as sens²·mean or max of
``per_query_error`` with sens² = ``minsep_sensitivity_squared`` (k participations at least s
apart; jax_privacy refuses coefficients that are not non-negative non-increasing, then the
value is left out). BLT errors: ``buffered_toeplitz.optimize_loss(LossFn.build_min_sep(T,
objective, s, k), num_buffers)`` (its default L-BFGS, 600 steps, from its rational
approximation of 1/√(1−x)), the loss it reports, sens²·mean or max of the per-query error, for
C with c_0 = 1. ε: dp_accounting's PLD of ``accounting.amplified_bandmf_event`` (add/remove,
its default discretization 1e-4 as dplab's ``pld``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import dp_accounting
import jax
import jax.numpy as jnp
from jax_privacy.experimental import accounting
from jax_privacy.matrix_factorization import buffered_toeplitz, toeplitz

jax.config.update("jax_enable_x64", True)

#: (T, bands, participations, min_separation)
ERROR_SETTINGS = [
    (100, 4, 1, 100),
    (1000, 16, 1, 1000),
    (1000, 16, 10, 100),
    (1000, 64, 10, 100),
    (10_000, 32, 1, 10_000),
    (10_000, 32, 20, 500),
    (1000, 64, 20, 32),
]
#: (T, buffers, participations, min_separation)
BLT_SETTINGS = [
    (200, 2, 1, 200),
    (1000, 3, 1, 1000),
    (1000, 3, 10, 100),
    (10_000, 4, 1, 10_000),
    (2000, 4, 5, 400),
]
#: (σ, T, bands, q, δ)
EPSILON_SETTINGS = [
    (1.0, 1000, 8, 0.01, 1e-6),
    (0.8, 2000, 16, 0.05, 1e-5),
    (2.0, 500, 1, 0.1, 1e-6),
]


def errors(T, bands, k, s, objective):
    reduction = jnp.mean if objective == "mean" else jnp.max
    coef = toeplitz.optimize_banded_toeplitz(T, bands, reduction_fn=reduction)
    try:
        sens2 = float(toeplitz.minsep_sensitivity_squared(coef, s, k, n=T))
    except ValueError:
        return None
    per_query = toeplitz.per_query_error(strategy_coef=coef, n=T)
    return {
        "T": T,
        "bands": bands,
        "participations": k,
        "min_separation": s,
        "objective": objective,
        "error": sens2 * float(reduction(per_query)),
        "sensitivity": math.sqrt(sens2),
    }


def blt_errors(T, buffers, k, s, objective):
    loss_fn = buffered_toeplitz.LossFn.build_min_sep(
        n=T, error=objective, min_sep=s, max_participations=k
    )
    blt, loss = buffered_toeplitz.optimize_loss(loss_fn, num_buffers=buffers)
    return {
        "T": T,
        "buffers": buffers,
        "participations": k,
        "min_separation": s,
        "objective": objective,
        "error": float(loss),
        "buf_decay": [float(v) for v in blt.buf_decay],
        "output_scale": [float(v) for v in blt.output_scale],
    }


def epsilon(sigma, T, bands, q, delta):
    event = accounting.amplified_bandmf_event(sigma, T, num_bands=bands, sampling_prob=q)
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(event)
    return {
        "noise_multiplier": sigma,
        "T": T,
        "bands": bands,
        "sampling_rate": q,
        "delta": delta,
        "epsilon": pld.get_epsilon(delta),
    }


def main() -> None:
    import importlib.metadata

    rows = [
        errors(*setting, objective) for setting in ERROR_SETTINGS for objective in ("mean", "max")
    ]
    out = {
        "jax_privacy": importlib.metadata.version("jax-privacy"),
        "errors": [r for r in rows if r is not None],
        "blt_errors": [
            blt_errors(*setting, objective)
            for setting in BLT_SETTINGS
            for objective in ("mean", "max")
        ],
        "epsilons": [epsilon(*setting) for setting in EPSILON_SETTINGS],
    }
    path = Path(__file__).with_name("jax_privacy_mf.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
