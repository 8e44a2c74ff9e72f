"""The subsampled Gaussian's one-step PLD: ours (inverse privacy loss on arrays) vs dp_accounting's.

    PYTHONPATH=src python benchmarks/pld_gaussian.py [--repeats 5]

For each (σ, q, discretization) of :data:`SETTINGS` (DP-SGD steps as the σ calibrations and figure
tables ask for them), builds the PLD with dp_accounting 0.6.0's ``from_gaussian_mechanism`` and
with :func:`dplab.accounting.pld_gaussian.gaussian_pld`, alternating, and prints one JSON line:
the least CPU time of each over ``--repeats``, their ratio, and whether the two PLDs' PMFs are
the same bytes. A last line gives the totals' ratio.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from dp_accounting.pld import privacy_loss_distribution

from dplab.accounting.pld_gaussian import gaussian_pld

#: (σ, q, discretization interval): the default DAG's kind of step (q = 0.05, the pld adapter's
#: intervals 1e-4..1e-3), a small σ (a wide loss range), a tiny q, a full batch
SETTINGS = [
    (0.9, 0.05, 1e-4),
    (0.5, 0.3, 1e-4),
    (1.1, 0.01, 1e-3),
    (4.0, 1e-3, 1e-4),
    (1.3, 1.0, 1e-4),
]


def pmf_bytes(pld) -> list[tuple]:
    dense = [pmf.to_dense_pmf() for pmf in (pld._pmf_remove, pld._pmf_add)]  # noqa: SLF001
    return [(d._lower_loss, np.asarray(d._probs).tobytes(), d._infinity_mass) for d in dense]  # noqa: SLF001


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    builders = {
        "dp_accounting": lambda s, q, d: privacy_loss_distribution.from_gaussian_mechanism(
            s, value_discretization_interval=d, sampling_prob=q
        ),
        "dplab": lambda s, q, d: gaussian_pld(s, d, q),
    }
    totals = dict.fromkeys(builders, 0.0)
    for sigma, q, disc in SETTINGS:
        best, made = {}, {}
        for _ in range(args.repeats):
            for name, build in builders.items():
                start = time.process_time()
                made[name] = build(sigma, q, disc)
                best[name] = min(best.get(name, np.inf), time.process_time() - start)
        for name in builders:
            totals[name] += best[name]
        print(
            json.dumps(
                {
                    "sigma": sigma,
                    "q": q,
                    "interval": disc,
                    "dp_accounting_cpu_s": round(best["dp_accounting"], 4),
                    "dplab_cpu_s": round(best["dplab"], 4),
                    "ratio": round(best["dp_accounting"] / best["dplab"], 2),
                    "same_bytes": pmf_bytes(made["dp_accounting"]) == pmf_bytes(made["dplab"]),
                }
            )
        )
    print(json.dumps({"total_ratio": round(totals["dp_accounting"] / totals["dplab"], 2)}))


if __name__ == "__main__":
    main()
