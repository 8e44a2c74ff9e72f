"""``dplab mf``: build a factorization of the prefix-sum workload, print its sensitivity and error.

    dplab mf --strategy banded --steps 200 --min-separation 8 --bands 8 --epsilon 1 --delta 1e-6
prints one JSON object: the parameters, ``sensitivity`` (and whether it is exact), ``max_error``,
``mean_error`` (see :mod:`dplab.mf.factorizations`), ``seconds`` (time to factorize and
evaluate) and, with --epsilon/--delta, the calibrated ``noise_multiplier`` for the sampler
(``--sampling min_separation``: b fixed batches cycled, k = ⌈T/b⌉; ``cyclic_poisson``: needs
--dataset-size and --batch-size, partitions = b).  ``--out FILE.npz`` also saves the factorization
(:func:`dplab.mf.factorizations.save`) for ``dplab train --mf-cache`` and the figures; the pipeline
names it ``results/mf/<strategy>_T<steps>[_m<bands>].npz`` (:func:`dplab.layout.cache_key`).
"""

from __future__ import annotations

import json
import time

from dplab.errors import DPLabError
from dplab.validate import integer


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mf",
        help="matrix-factorization mechanism: sensitivity, error, σ",
        description="Factorize the T×T prefix-sum workload A = B·C with a strategy (identity, sqrt, optimal, "
        "banded) and print JSON with its sensitivity under the participation pattern, the max and mean "
        "squared error of the privatized prefix sums per unit noise, and the time it took; with --epsilon "
        "and --delta also the calibrated noise multiplier (004 §4; Choquette-Choo et al. 2023/2024).",
    )
    p.add_argument("--strategy", help="identity, sqrt, optimal or banded (see docs/matrix_factorization.md)")
    p.add_argument("--steps", type=int, help="T (at most 6688: its T×T matrices stay within MEMORY_MAX = 2 GiB)")
    p.add_argument("--participations", type=int, default=None, help="k (default ⌈T/b⌉)")
    p.add_argument("--min-separation", type=int, default=None, help="b (default T: single participation)")
    p.add_argument("--bands", type=int, default=None, help="bands of C (banded strategy; <= b)")
    p.add_argument("--momentum", type=float, default=0.0, help="β folded into the workload")
    p.add_argument("--epsilon", type=float, default=None, help="target ε: also print the calibrated noise multiplier (with --delta)")
    p.add_argument("--delta", type=float, default=None, help="target δ in (0, 1) (with --epsilon)")
    p.add_argument("--neighbouring", default="add_remove", choices=("add_remove", "replace_one"),
                   help="neighbouring relation of the accounting (with --epsilon/--delta)")
    p.add_argument("--sampling", default="min_separation", choices=("min_separation", "cyclic_poisson"),
                   help="participation scheme the accounting assumes: k participations >= b steps apart "
                   "(no amplification) or cyclic Poisson sampling over b partitions (amplified; banded C)")
    p.add_argument("--dataset-size", type=int, default=None, help="n (cyclic_poisson: with --batch-size gives the sampling rate)")
    p.add_argument("--batch-size", type=float, default=None, help="expected batch size per step (cyclic_poisson)")
    p.add_argument("--out", default=None,
                   help="also save the factorization to this .npz file (read by `dplab train --mf-cache DIR` "
                   "as DIR/<strategy>_T<steps>[_m<bands>].npz)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dplab.io import check_output
    from dplab.mf import accounting, factorizations, workload

    if args.out is not None:
        check_output(args.out, "--out")
    if args.strategy is None or args.steps is None:
        raise DPLabError("strategy", "--strategy and --steps are required")
    start = time.perf_counter()
    steps = workload.check_steps(args.steps)
    b = steps if args.min_separation is None else args.min_separation
    integer("min_separation", b)
    k = -(-steps // b) if args.participations is None else args.participations
    if (args.epsilon is None) != (args.delta is None):
        raise DPLabError("epsilon", "give both --epsilon and --delta, or neither")
    factorizations.check_strategy(args.strategy, args.bands)
    sampler = None if args.epsilon is None else _sampler(args, steps, b, k)  # every flag checked before the work
    A = workload.momentum_workload(steps, args.momentum)
    fact = factorizations.factorize(args.strategy, A, bands=args.bands, min_separation=b)
    out = {
        "strategy": args.strategy,
        "steps": steps,
        "participations": k,
        "min_separation": b,
        "bands": fact.bands,
        "momentum": args.momentum,
        **fact.errors(k, b),
    }
    if sampler is not None:
        if args.sampling == "cyclic_poisson":
            out.update(dataset_size=args.dataset_size, batch_size=args.batch_size, sampling_rate=sampler.sampling_rate)
        sigma = accounting.calibrate(fact, sampler, args.epsilon, args.delta, args.neighbouring)
        out.update(
            epsilon=args.epsilon, delta=args.delta, neighbouring=args.neighbouring, sampling=args.sampling,
            noise_multiplier=sigma,
        )
    out["seconds"] = time.perf_counter() - start
    if args.out is not None:
        factorizations.save(fact, args.out, momentum=args.momentum)
        out["out"] = args.out
    print(json.dumps(out, ensure_ascii=False))
    return 0


def _sampler(args, steps: int, b: int, k: int):
    """The sampler the calibration assumes, with ε and δ checked (before any factorization)."""
    from dplab.mf import accounting

    accounting.check_target(args.epsilon, args.delta)
    if args.sampling == "cyclic_poisson":
        if args.dataset_size is None or args.batch_size is None:
            raise DPLabError("dataset_size", "--sampling cyclic_poisson needs --dataset-size and --batch-size")
        return accounting.CyclicPoisson(args.dataset_size, args.batch_size, b, steps)
    sampler = accounting.MinSeparation(b, steps)
    if k != sampler.participations:
        raise DPLabError("participations", f"the cyclic fixed-batch sampler gives k = ceil(T/b) = {sampler.participations}; got {k}")
    return sampler

