"""Writes tests/guard_references.json: certified lower bounds on the exact ε(δ) and δ(ε) of
settings at the edges of the composition accountants (q near 1, n = 2), too slow to compute in
CI (2 to 35 s each).  Run from the repository root: ``PYTHONPATH=src python
tests/make_guard_references.py`` (about 3 minutes on 2 cores, dp_accounting 0.6.0).

Each value is dp_accounting's PLD with the *optimistic* discretization (a lower bound on the exact
ε and δ) of T compositions of one step's pair, the reference of tests/test_accounting_guard.py:
Poisson + add_remove, its ADD_OR_REMOVE_ONE pair at rate q; without_replacement + replace_one, the
record's clipped gradient +C in D and −C in D′ (every other 0) drawn with probability b/n: its
REPLACE_ONE pair at rate b/n.
"""

import json
import pathlib

import dp_accounting
from dp_accounting.pld import privacy_loss_distribution

#: (sampling, σ, b, n, T): q = b/n
SETTINGS = [
    ("poisson", 2.0, 99, 100, 1),
    ("poisson", 2.0, 99, 100, 100),
    ("without_replacement", 2.0, 99, 100, 1),
    ("without_replacement", 2.0, 99, 100, 100),
    ("without_replacement", 0.6, 99, 100, 1),
    ("without_replacement", 1.0, 1, 2, 1),
    ("without_replacement", 1.0, 1, 2, 50),
]
DELTAS = (1e-3, 1e-9)


def main() -> None:
    rows = []
    for sampling, sigma, b, n, steps in SETTINGS:
        relation = (
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
            if sampling == "poisson"
            else dp_accounting.NeighboringRelation.REPLACE_ONE
        )
        pld = privacy_loss_distribution.from_gaussian_mechanism(
            sigma,
            sampling_prob=b / n,
            pessimistic_estimate=False,
            use_connect_dots=False,
            value_discretization_interval=1e-4,
            neighboring_relation=relation,
        ).self_compose(steps)
        for delta in DELTAS:
            eps = float(pld.get_epsilon_for_delta(delta))
            rows.append(
                {
                    "sampling": sampling,
                    "noise_multiplier": sigma,
                    "batch_size": b,
                    "dataset_size": n,
                    "steps": steps,
                    "delta": delta,
                    "epsilon_lower": eps,
                    "delta_lower_at_epsilon": float(pld.get_delta_for_epsilon(eps)),
                }
            )
    path = pathlib.Path(__file__).with_name("guard_references.json")
    path.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
