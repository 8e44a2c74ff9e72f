"""``dplab mf``: build a factorization of the prefix-sum workload, print its sensitivity and error.

    dplab mf --strategy banded --steps 200 --min-separation 8 --bands 8 --epsilon 1 --delta 1e-6
prints one JSON object: the parameters, ``sensitivity`` (and whether it is exact), ``max_error``,
``mean_error`` (see :mod:`dplab.mf.factorizations`), ``seconds`` (time to factorize and
evaluate) and, with --epsilon/--delta, the calibrated ``noise_multiplier`` for the sampler
(``--sampling min_separation``: b partitions cycled as the batches, k = ⌈T/b⌉; ``cyclic_poisson``:
needs --dataset-size and --batch-size, partitions = b, and its amplified ε depends on ζ = the max
column norm only, so the error is optimized and printed for one participation, as a dp_mf run
does; both put each record in a partition drawn independently once per run, so the ε holds under
add/remove with Δ₁ = 1, and replace-one with 2: :mod:`dplab.mf.accounting`).  ``--out FILE.npz``
also saves the factorization (:func:`dplab.mf.saved.save`; banded_toeplitz and blt: C's first
column and inverse filters, O(T); each part checked against the others when read back) for
``dplab train --mf-cache`` and the figures; the pipeline names it ``results/mf/<key>.npz``
(:func:`dplab.layout.cache_key`).

    dplab mf --strategy banded_toeplitz --steps 100000 --bands 32 --objective max \
        --noise-multiplier 1 --sampling-rate 0.01 --delta 1e-6
optimizes a banded Toeplitz C in O(T·b) per step (:mod:`dplab.mf.toeplitz`, no T×T matrix) for
``--objective`` mean or max, and prints the ε of amplified BandMF (``--sampling-rate`` q: b = bands
groups, each Poisson-sampled once every b steps, ⌈T/b⌉ sampled Gaussians, add/remove, PLD; it
assumes each record's group is its own, fixed for the run, independent of the others;
``--epsilon`` instead calibrates σ; σ is relative to ζ = the max column norm, 1 here, whatever
``--participations``/``--min-separation`` say about the printed errors).  Without
``--sampling-rate`` the accounting is the unamplified one (k participations ≥ s apart: one Gaussian
of the stated sensitivity).

    dplab mf --strategy blt --steps 100000 --buffers 5 --objective max
optimizes a buffered linear Toeplitz C with k = ``--buffers`` buffers (:mod:`dplab.mf.blt`, O(T·k)
per step, no T×T matrix).  A BLT has T bands, so amplified BandMF does not hold for it: its ε is
the unamplified one (``--sampling-rate`` is refused).
"""

from __future__ import annotations

import json
import time

from dplab.errors import DPLabError
from dplab.schemes import Neighbouring, Sampling
from dplab.validate import integer, positive


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mf",
        help="matrix-factorization mechanism: sensitivity, error, σ",
        description=(
            "Factorize the T×T prefix-sum workload A = B·C with a strategy (identity, sqrt,"
            " optimal, banded, banded_toeplitz, blt) and print JSON with its sensitivity under the"
            " participation pattern, the max and mean squared error of the privatized prefix sums"
            " per unit noise, and the time it took; with --epsilon and --delta also the calibrated"
            " noise multiplier (004 §4; Choquette-Choo et al. 2023/2024)."
        ),
    )
    p.add_argument(
        "--strategy",
        help=(
            "identity, sqrt, optimal, banded, banded_toeplitz or blt (see"
            " docs/matrix_factorization.md)"
        ),
    )
    p.add_argument(
        "--steps",
        type=int,
        help="T (dense strategies: at most 6688, their T×T matrices stay within "
        "MEMORY_MAX = 2 GiB; banded_toeplitz, blt: no T×T matrix)",
    )
    p.add_argument("--participations", type=int, default=None, help="k (default ⌈T/b⌉)")
    p.add_argument(
        "--min-separation", type=int, default=None, help="b (default T: single participation)"
    )
    p.add_argument("--bands", type=int, default=None, help="bands of C (banded strategy; <= b)")
    p.add_argument(
        "--buffers", type=int, default=None, help="buffers of the BLT (blt strategy; 1 to 15)"
    )
    p.add_argument(
        "--objective",
        default=None,
        choices=("mean", "max"),
        help="what the optimizer minimizes: mean or max squared error (banded_toeplitz, blt: both; "
        "optimal, banded: mean; default mean)",
    )
    p.add_argument("--momentum", type=float, default=0.0, help="β folded into the workload")
    p.add_argument(
        "--noise-multiplier", type=float, default=None, help="σ: also print ε at --delta"
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="target ε: also print the calibrated noise multiplier (with --delta)",
    )
    p.add_argument("--delta", type=float, default=None, help="target δ in (0, 1) (with --epsilon)")
    p.add_argument(
        "--neighbouring",
        default=None,
        choices=tuple(Neighbouring),
        help="neighbouring relation of the accounting (with --delta; default add_remove)",
    )
    p.add_argument(
        "--sampling",
        default=None,
        choices=(Sampling.MIN_SEPARATION, Sampling.CYCLIC_POISSON),
        help="participation scheme the accounting assumes, each record in one of b "
        "partitions drawn independently once per run: partition t mod b is batch t (k "
        "participations >= b steps apart, no amplification) or is Poisson-sampled at "
        "step t (cyclic_poisson: amplified; banded C); with --delta; default min_separation",
    )
    p.add_argument(
        "--sampling-rate",
        type=float,
        default=None,
        help=(
            "q: amplified BandMF accounting, b = bands groups each Poisson-sampled with rate q once"
            " every b steps (banded strategies); assumes each record's group is fixed for the run"
            " and independent of the other records (drawn as dp_mf's cyclic_poisson does)"
        ),
    )
    p.add_argument(
        "--dataset-size",
        type=int,
        default=None,
        help="n (cyclic_poisson: with --batch-size gives the sampling rate)",
    )
    p.add_argument(
        "--batch-size",
        type=float,
        default=None,
        help="expected batch size per step (cyclic_poisson)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="also save the factorization to this .npz file (read by `dplab train --mf-cache DIR` "
        "as DIR/<key>.npz, key = <strategy>_T<steps>[_m<bands>][_k<buffers>][_<objective>][_s<b>])",
    )
    p.set_defaults(func=run)


#: the strategies each --objective is offered for (the others have nothing to optimize)
OBJECTIVES = {
    "optimal": ("mean",),
    "banded": ("mean",),
    "banded_toeplitz": ("mean", "max"),
    "blt": ("mean", "max"),
}
#: the strategies optimized in O(T·b) or O(T·k) without a T×T matrix
#: (:mod:`dplab.mf.toeplitz`, :mod:`dplab.mf.blt`)
TOEPLITZ = ("banded_toeplitz", "blt")
#: the strategies amplified BandMF (--sampling-rate, --sampling cyclic_poisson) holds
#: for: C with at most b bands
AMPLIFIED = ("identity", "banded", "banded_toeplitz")


def _check_flags(args, steps: int, min_separation: int) -> None:
    """Refuse a flag the strategy does not take, before any optimization starts."""
    from dplab.accounting.setting import check_delta, check_epsilon
    from dplab.mf import accounting, blt, factorizations, toeplitz

    strategy = args.strategy
    if strategy not in (*factorizations.STRATEGIES, *TOEPLITZ):
        raise DPLabError(
            "strategy",
            f"must be one of {', '.join((*factorizations.STRATEGIES, *TOEPLITZ))}; "
            f"got {strategy!r}",
        )
    if args.objective is not None and args.objective not in OBJECTIVES.get(strategy, ()):
        offered = ", ".join(OBJECTIVES.get(strategy, ())) or "none (nothing to optimize)"
        raise DPLabError(
            "objective", f"{strategy} supports objective {offered}; got {args.objective!r}"
        )
    if args.buffers is not None and strategy != "blt":
        raise DPLabError("buffers", f"only applies to the blt strategy; got --strategy {strategy}")
    if strategy == "blt":
        if args.buffers is None:
            raise DPLabError("buffers", "is required for the blt strategy")
        if args.bands is not None:
            raise DPLabError(
                "bands", "does not apply to the blt strategy (a BLT has T bands; give --buffers)"
            )
        blt.check_buffers(args.buffers, steps)
    if strategy == "banded_toeplitz":
        if args.bands is None:
            raise DPLabError("bands", "is required for the banded_toeplitz strategy")
        toeplitz.check_bands(args.bands, steps)
    if strategy in TOEPLITZ:
        if args.momentum != 0:
            raise DPLabError("momentum", f"{strategy} factorizes the prefix sum only (momentum 0)")
    else:
        factorizations.check_strategy(strategy, args.bands)
    cyclic = args.sampling == Sampling.CYCLIC_POISSON
    # b ≥ T partitions: every T×T lower-triangular C has at most b bands (one participation)
    if (
        args.sampling_rate is not None or (cyclic and min_separation < steps)
    ) and strategy not in AMPLIFIED:
        raise DPLabError(
            "sampling_rate",
            f"amplified BandMF holds for C with at most b bands ({', '.join(AMPLIFIED)}, or "
            f"--min-separation b >= --steps); {strategy} is accounted without amplification: "
            "drop --sampling-rate and --sampling cyclic_poisson",
        )
    if (args.sampling_rate is not None or cyclic) and args.neighbouring is not None:
        accounting.check_amplified_neighbouring(args.neighbouring)
    if args.sampling_rate is not None and cyclic:
        raise DPLabError(
            "sampling_rate", "give --sampling-rate or --sampling cyclic_poisson, not both"
        )
    if args.sampling_rate is not None and not 0 < args.sampling_rate <= 1:
        raise DPLabError("sampling_rate", f"must lie in (0, 1]; got {args.sampling_rate}")
    if args.noise_multiplier is not None:
        positive("noise_multiplier", args.noise_multiplier)
    if args.delta is not None:
        check_delta(args.delta)
    if args.epsilon is not None:
        check_epsilon(args.epsilon)
    if args.noise_multiplier is not None and args.epsilon is not None:
        raise DPLabError(
            "noise_multiplier",
            "give --noise-multiplier (to get ε) or --epsilon (to get σ), not both",
        )
    if (args.epsilon is not None or args.noise_multiplier is not None) and args.delta is None:
        raise DPLabError("delta", "--epsilon and --noise-multiplier need --delta")
    if args.delta is not None and args.epsilon is None and args.noise_multiplier is None:
        raise DPLabError("epsilon", "give --epsilon or --noise-multiplier with --delta")
    if args.epsilon is not None:
        accounting.check_target(args.epsilon, args.delta)
    if args.delta is None:  # no accounting: its flags would be ignored
        given = [
            flag
            for flag, value in (
                ("--sampling-rate", args.sampling_rate),
                ("--sampling", args.sampling),
                ("--neighbouring", args.neighbouring),
                ("--dataset-size", args.dataset_size),
                ("--batch-size", args.batch_size),
            )
            if value is not None
        ]
        if given:
            raise DPLabError(
                given[0].lstrip("-").replace("-", "_"),
                f"{given[0]} sets the accounting, which runs only "
                "with --delta (and --epsilon or --noise-multiplier)",
            )
    elif args.sampling != Sampling.CYCLIC_POISSON and (
        args.dataset_size is not None or args.batch_size is not None
    ):
        raise DPLabError(
            "dataset_size",
            "--dataset-size and --batch-size set the cyclic_poisson sampler only; "
            "give --sampling cyclic_poisson, or drop them",
        )


def _sampler(args, steps: int, b: int, k: int, out: dict):
    """The sampler the accounting assumes (module docstring), its parameters added to ``out``; built
    before the optimization so that its refusals come first."""
    from dplab.mf import accounting

    if args.sampling_rate is not None:
        groups = 1 if args.strategy == "identity" else args.bands
        out.update(sampling="amplified_bandmf", sampling_rate=args.sampling_rate, groups=groups)
        return accounting.PoissonGroups(args.sampling_rate, groups, steps)
    if args.sampling == Sampling.CYCLIC_POISSON:
        if args.dataset_size is None or args.batch_size is None:
            raise DPLabError(
                "dataset_size", "--sampling cyclic_poisson needs --dataset-size and --batch-size"
            )
        sampler = accounting.CyclicPoisson(args.dataset_size, args.batch_size, b, steps)
        out.update(
            sampling=args.sampling,
            dataset_size=args.dataset_size,
            batch_size=args.batch_size,
            sampling_rate=sampler.sampling_rate,
        )
        return sampler
    sampler = accounting.MinSeparation(b, steps)
    if k != sampler.participations:
        raise DPLabError(
            "participations",
            f"the min_separation sampler (b partitions cycled) gives "
            f"k = ceil(T/b) = {sampler.participations}; got {k}",
        )
    out.update(sampling=Sampling.MIN_SEPARATION)
    return sampler


def run(args) -> int:
    from dplab.io import check_output
    from dplab.mf import accounting, blt, factorizations, saved, toeplitz, workload

    if args.out is not None:
        check_output(args.out, "--out")
    if args.strategy is None or args.steps is None:
        raise DPLabError("strategy", "--strategy and --steps are required")
    start = time.perf_counter()
    if args.strategy in TOEPLITZ:
        steps = toeplitz.check_steps(args.steps)
    else:
        steps = workload.check_steps(args.steps)
    b = steps if args.min_separation is None else args.min_separation
    integer("min_separation", b)
    most = -(-steps // b)  # ⌈T/b⌉: the most participations b apart in T steps
    k = (
        most
        if args.participations is None
        else integer("participations", args.participations, 1, most, "ceil(steps/min_separation)")
    )
    _check_flags(args, steps, b)
    s = b  # the separation the optimizer's k participations keep
    if args.sampling == Sampling.CYCLIC_POISSON:  # ε depends on ζ = ‖c‖ only: one participation,
        if args.participations is not None:  # as dp_mf's build_factorization optimizes it
            raise DPLabError(
                "participations",
                "cyclic_poisson's ε depends on the max column norm ζ only: the error is optimized"
                " and printed for one participation, as a dp_mf run does; drop --participations",
            )
        k, s = 1, None
    privacy: dict = {}
    sampler = _sampler(args, steps, b, k, privacy) if args.delta is not None else None
    if args.strategy == "banded_toeplitz":
        fact = toeplitz.banded_toeplitz(steps, args.bands, args.objective or "mean", k, s)
    elif args.strategy == "blt":
        fact = blt.blt(steps, args.buffers, args.objective or "mean", k, s)
    else:
        A = workload.momentum_workload(steps, args.momentum)
        fact = factorizations.factorize(args.strategy, A, bands=args.bands, min_separation=b)
    optimized = time.perf_counter() - start
    out = {
        "strategy": args.strategy,
        "steps": steps,
        "participations": k,
        "min_separation": b,
        "bands": fact.bands,
        **({"buffers": args.buffers} if args.strategy == "blt" else {}),
        "momentum": args.momentum,
        **({"objective": args.objective or "mean"} if args.strategy in OBJECTIVES else {}),
        **fact.errors(k, b),
        "optimization_seconds": optimized,
    }
    if sampler is not None:
        neighbouring = args.neighbouring or Neighbouring.ADD_REMOVE
        out.update(privacy, delta=args.delta, neighbouring=neighbouring)
        if args.epsilon is not None:
            out.update(
                epsilon=args.epsilon,
                noise_multiplier=accounting.calibrate(
                    fact, sampler, args.epsilon, args.delta, neighbouring
                ),
            )
        else:
            out.update(
                noise_multiplier=args.noise_multiplier,
                epsilon=accounting.epsilon(
                    fact, sampler, args.noise_multiplier, args.delta, neighbouring
                ),
            )
    out["seconds"] = time.perf_counter() - start
    if args.out is not None:
        saved.save(fact, args.out, momentum=args.momentum)
        out["out"] = args.out
    print(json.dumps(out, ensure_ascii=False))
    return 0
