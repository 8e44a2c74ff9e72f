r"""Cost of a run in phases' ε curve (one call, every logged step) vs dp_accounting row by row.

    PYTHONPATH=src python benchmarks/phases_curve.py [--steps 2000] [--log-every 100]
        [--delta 1e-5] [--neighbouring add_remove]

The run: ``--steps`` steps at q = 0.01, σ = 1.1, then as many at q = 0.02, σ = 2.0 (Poisson),
logged every ``--log-every`` steps, as a training run in phases writes its metrics.csv
(:func:`dplab.accounting.phases.epsilon_curve`).  Prints one JSON object: the wall time of our
``pld`` and ``rdp`` curves (one call each), of dp_accounting's PLDAccountant (interval 1e-4) and
RdpAccountant composing each row's phases (one evaluation per row, as a user would without a
curve), their ratios, and how far our values lie from dp_accounting's (relative; ours are
certified upper bounds, so the PLD column may lie above it).
"""

from __future__ import annotations

import argparse
import json
import time

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting import phases
from dplab.accounting.setting import Setting

PHASES = [(0.01, 1.1), (0.02, 2.0)]  # (q, σ) of each phase
RELATION = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}


def peer_epsilon(name: str, prefix: list[Setting], delta: float, neighbouring: str) -> float:
    """dp_accounting's ε of the phases ``prefix`` composed (one accountant, one evaluation)."""
    if name == "pld":
        accountant = pld_privacy_accountant.PLDAccountant(
            RELATION[neighbouring], value_discretization_interval=1e-4
        )
    else:
        accountant = rdp_privacy_accountant.RdpAccountant(
            neighboring_relation=RELATION[neighbouring]
        )
    for p in prefix:
        step = dp_accounting.PoissonSampledDpEvent(
            p.sampling_rate, dp_accounting.GaussianDpEvent(p.noise_multiplier)
        )
        accountant.compose(step, p.steps)
    return accountant.get_epsilon(delta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000, help="steps of each phase")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--neighbouring", default="add_remove", choices=sorted(RELATION))
    args = ap.parse_args()
    run = [
        Setting(
            noise_multiplier=s, sampling_rate=q, steps=args.steps, neighbouring=args.neighbouring
        )
        for q, s in PHASES
    ]
    total = sum(p.steps for p in run)
    rows = list(range(args.log_every, total + 1, args.log_every))
    names = ["pld"] + (["rdp"] if args.neighbouring == "add_remove" else [])  # rdp: add/remove
    out = {"rows": len(rows), "delta": args.delta, "neighbouring": args.neighbouring}
    for name in names:
        t0 = time.perf_counter()
        ours = phases.epsilon_curve(name, run, args.delta, rows)
        t1 = time.perf_counter()
        theirs = [
            peer_epsilon(name, phases.prefix(run, s), args.delta, args.neighbouring) for s in rows
        ]
        t2 = time.perf_counter()
        out[name] = {
            "ours_s": round(t1 - t0, 4),
            "dp_accounting_s": round(t2 - t1, 4),
            "ratio": round((t1 - t0) / (t2 - t1), 3),
            "relative_difference": [
                round(min(a / b - 1 for a, b in zip(ours, theirs)), 6),
                round(max(a / b - 1 for a, b in zip(ours, theirs)), 6),
            ],
            "epsilon_last": ours[-1],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
