"""pld against dp_accounting's PLD on random settings: how tight its certified ε is, and whether it
grows with T and falls with δ.

    PYTHONPATH=src python benchmarks/pld_random.py [--seed 5] [--count 100] [--interval 1e-5]

Each setting is drawn log-uniformly: σ in [0.4, 20], q in [1e-5, 0.5], T in [1, 3000], δ in
[1e-12, 1e-2], and add_remove or replace_one.  One JSON line per setting: pld's ε, dp_accounting's
(``PLDAccountant`` at ``--interval``, its pessimistic connect-the-dots PLD: itself an upper bound,
tighter the finer the interval), their ratio, pld's ε at 2T and at 10δ, and the seconds each took.
A summary line ends it: the ratio's median and extremes, the settings where pld is more than 1 %
(+ 1e-3) above dp_accounting ("loose"), where it falls as T doubles or rises as δ grows ten-fold
by more than 2e-4 ("not monotone"), and where it is below dp_accounting by more than 0.1 %
(expected only where dp_accounting's interval is coarser than pld's own: large σ, small q, where
pld refines to a quarter of one step's loss std).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
import warnings

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

from dplab.accounting import Setting, get
from dplab.errors import DPLabError

#: how far pessimistic discretization may move ε against monotonicity
#: (tests/test_accounting_properties.py)
SLACK = 2e-4
RELATIONS = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}


def log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def draw(rng: random.Random) -> dict:
    return {
        "noise_multiplier": log_uniform(rng, 0.4, 20.0),
        "sampling_rate": log_uniform(rng, 1e-5, 0.5),
        "steps": int(log_uniform(rng, 1.0, 3000.0)),
        "delta": log_uniform(rng, 1e-12, 1e-2),
        "neighbouring": rng.choice(sorted(RELATIONS)),
    }


def reference(case: dict, interval: float) -> float:
    """dp_accounting's ε of ``case`` at discretization ``interval``."""
    accountant = pld_privacy_accountant.PLDAccountant(
        RELATIONS[case["neighbouring"]], value_discretization_interval=interval
    )
    gaussian = dp_accounting.GaussianDpEvent(case["noise_multiplier"])
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(case["sampling_rate"], gaussian), case["steps"]
    )
    return accountant.get_epsilon(case["delta"])


def measure(case: dict, interval: float) -> dict:
    pld = get("pld")
    setting = Setting(
        noise_multiplier=case["noise_multiplier"],
        sampling_rate=case["sampling_rate"],
        steps=case["steps"],
        neighbouring=case["neighbouring"],
    )
    start = time.perf_counter()
    try:
        ours = pld.epsilon(setting, case["delta"])
    except DPLabError as err:
        return {**case, "refused": str(err)}
    ours_s = time.perf_counter() - start
    ref = reference(case, interval)
    ref_s = time.perf_counter() - start - ours_s
    longer = pld.epsilon(setting.replace(steps=2 * case["steps"]), case["delta"])
    looser = pld.epsilon(setting, min(10 * case["delta"], 1.0))
    return {
        **case,
        "pld": ours,
        "dp_accounting": ref,
        "ratio": ours / ref if ref > 0 else (1.0 if ours == 0 else math.inf),
        "pld_2T": longer,
        "pld_10delta": looser,
        "pld_s": round(ours_s, 3),
        "dp_accounting_s": round(ref_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--interval", type=float, default=1e-5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # dp_accounting's and scipy's runtime warnings
    rng = random.Random(args.seed)
    rows = []
    for _ in range(args.count):
        row = measure(draw(rng), args.interval)
        rows.append(row)
        print(json.dumps(row), flush=True)
    done = [r for r in rows if "pld" in r]
    ratios = [r["ratio"] for r in done]
    summary = {
        "settings": len(rows),
        "refused": len(rows) - len(done),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "loose": sum(r["pld"] > 1.01 * r["dp_accounting"] + 1e-3 for r in done),
        "below": sum(r["pld"] < r["dp_accounting"] * (1 - 1e-3) for r in done),
        "not_monotone": sum(
            r["pld_2T"] < r["pld"] - SLACK or r["pld_10delta"] > r["pld"] + SLACK for r in done
        ),
    }
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()
