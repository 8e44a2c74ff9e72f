r"""Cost of a whole PLD ε curve (every T in 1..T_max in one call) vs one dp_accounting evaluation.

    PYTHONPATH=src python benchmarks/accounting.py [--steps 10000] [--q 0.01] [--sigma 1.0] \
        [--delta 1e-5]

Prints one JSON object: the wall time of ``pld.epsilon_curve`` on T = 1..steps (one call), of one
``dp_accounting`` PLDAccountant evaluation at T = steps (same discretization 1e-4), their ratio,
the bound on the relative excess of the curve (``pld_curve.EXCESS``) and the RDP curve's time.
Both PLD timings are taken in this process, alternating, median of ``--repeats``.
"""

import argparse
import json
import statistics
import time

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

from dplab.accounting import pld_curve, registry
from dplab.accounting.setting import Setting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--q", type=float, default=0.01)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--neighbouring", default="add_remove", choices=["add_remove", "replace_one"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    s = Setting(
        noise_multiplier=args.sigma,
        sampling_rate=args.q,
        steps=args.steps,
        sampling="poisson",
        neighbouring=args.neighbouring,
    )
    rel = (
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
        if args.neighbouring == "add_remove"
        else dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    pld, rdp = registry.get("pld"), registry.get("rdp")
    with_rdp = args.neighbouring == "add_remove"  # rdp has no poisson + replace_one
    curve_t, single_t, rdp_t = [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        curve = pld.epsilon_curve(s, args.delta)
        t1 = time.perf_counter()
        acc = pld_privacy_accountant.PLDAccountant(
            rel, value_discretization_interval=pld.value_discretization_interval
        )
        acc.compose(
            dp_accounting.PoissonSampledDpEvent(args.q, dp_accounting.GaussianDpEvent(args.sigma)),
            args.steps,
        )
        single = acc.get_epsilon(args.delta)
        t2 = time.perf_counter()
        if with_rdp:
            rdp.epsilon_curve(s, args.delta)
        t3 = time.perf_counter()
        curve_t.append(t1 - t0)
        single_t.append(t2 - t1)
        rdp_t.append(t3 - t2)
    c, o = statistics.median(curve_t), statistics.median(single_t)
    print(
        json.dumps(
            {
                "steps": args.steps,
                "q": args.q,
                "sigma": args.sigma,
                "delta": args.delta,
                "neighbouring": args.neighbouring,
                "pld_curve_s": round(c, 3),
                "dp_accounting_single_s": round(o, 3),
                "ratio": round(c / o, 2),
                "excess_bound": pld_curve.EXCESS,
                "epsilon_at_max_curve": float(curve[-1]),
                "epsilon_at_max_dp_accounting": single,
                "rdp_curve_s": round(statistics.median(rdp_t), 3) if with_rdp else None,
            }
        )
    )


if __name__ == "__main__":
    main()
