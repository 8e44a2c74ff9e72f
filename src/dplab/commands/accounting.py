"""``dplab epsilon | delta | sigma | accountants``: every registered accountant, one JSON object.

Setting flags are the canonical names of docs/units.md in kebab case; the output repeats
the setting and names the accountant, δ, neighbouring relation and sampling it assumed.
"""

from __future__ import annotations

import argparse
import json
import math

from dplab import accounting, units
from dplab.accounting.base import DELTA_FLOOR
from dplab.accounting.setting import NEIGHBOURINGS, SAMPLINGS, Setting
from dplab.errors import DPLabError
from dplab.schemes import Neighbouring, Sampling

#: (flag, type, help) of every Setting field, in canonical order (docs/units.md)
SETTING_FLAGS: tuple[tuple[str, type, str], ...] = (
    (
        "noise_multiplier",
        float,
        "σ: std of the Gaussian noise on the clipped SUM of gradients, divided by the clip norm C "
        "(for gaussian_*: std/Δ)",
    ),
    ("sampling_rate", float, "q = b/n: per-step inclusion probability, in (0, 1]"),
    (
        "batch_size",
        int,
        "b: expected (Poisson) or fixed batch size; with --dataset-size gives q = b/n",
    ),
    ("dataset_size", int, "n: number of training records"),
    ("steps", int, "T: number of noisy updates (K in 002)"),
    ("clip", float, "C: per-example L2 clipping norm"),
    ("lr", float, "η: learning rate"),
    ("diameter", float, "D: diameter of the projection set (projected DP-SGD, 001)"),
    ("regularization", float, "λ of 001 eq. (17): weight decay in w ← (1−λ)w − …, in [0, 1)"),
    ("strong_convexity", float, "λ: strong convexity constant of the loss (000 §VII, 002)"),
    ("smoothness", float, "β: smoothness constant of the loss"),
    ("lipschitz", float, "L: Lipschitz constant of the loss"),
    ("dimension", int, "d: number of model parameters"),
    ("alpha", float, "α: Rényi order (> 1), where an accountant takes a fixed order"),
    (
        "sensitivity",
        float,
        "Δ: L2 sensitivity of a single Gaussian release (gaussian_* accountants)",
    ),
)


def _finite(kind: type, flag: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag}: expected {kind.__name__}, got {text!r}"
            ) from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{flag}: expected a finite number, got {text!r}")
        return value

    return parse


def _add_setting_flags(parser: argparse.ArgumentParser, computed: str | None = None) -> None:
    """The setting flags, less the field the subcommand ``computed`` (so giving
    it is a usage error)."""
    parser.add_argument(
        "--accountant", required=True, help="accountant name (see `dplab accountants`)"
    )
    for name, kind, help_text in SETTING_FLAGS:
        if name == computed:
            continue
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, dest=name, type=_finite(kind, flag), default=None, help=help_text)
    parser.add_argument(
        "--sampling",
        choices=SAMPLINGS,
        default=None,
        help="sampling scheme (default poisson; full_batch for one release: gaussian_*)",
    )
    parser.add_argument(
        "--neighbouring",
        choices=NEIGHBOURINGS,
        default=Neighbouring.ADD_REMOVE,
        help=(
            "neighbouring relation: add_remove (sum sensitivity C) or replace_one (2C); default"
            " add_remove"
        ),
    )
    parser.add_argument(
        "--reshuffle",
        action="store_true",
        default=None,
        help=(
            "with --sampling shuffle: a new partition of the data every epoch (default: one fixed"
            " partition cycled in the same order, 000 Alg. 2)"
        ),
    )


def _one_release(accountant) -> bool:
    """A gaussian_* accountant: one release of f + N(0, (σΔ)²), every record once (it requires
    the sensitivity Δ)."""
    return "sensitivity" in accountant.requires


def _setting(args: argparse.Namespace, accountant, also: tuple[str, ...] = ()) -> Setting:
    """The Setting of the flags given; a flag ``accountant`` never reads (:attr:`Accountant.unused`,
    one list per accountant: ``dplab accountants`` prints what each ``reads``), and the command
    does not read itself (``also``), is refused, since the answer would be the same without it."""
    if accountant.noise != "independent":
        raise DPLabError(
            "--accountant",
            f"{accountant.name!r} accounts the matrix mechanism's event "
            "(MatrixFactorizationDpEvent), not a setting of these flags: "
            "use `dplab mf` or a dp_mf run",
        )
    fields = {name: getattr(args, name, None) for name, _, _ in SETTING_FLAGS}
    fields = {k: v for k, v in fields.items() if v is not None}
    for name in accountant.unused:
        if name in fields and name not in also:
            readers = [n for n in accounting.names() if name not in accounting.get(n).unused]
            raise DPLabError(
                "--" + name.replace("_", "-"),
                f"accountant {accountant.name!r} does not read it (its answer is the same without"
                f" it); drop it, or use one that does: {', '.join(readers)}",
            )
    default = Sampling.FULL_BATCH if _one_release(accountant) else Sampling.POISSON
    return Setting(
        sampling=args.sampling or default,
        neighbouring=args.neighbouring,
        reshuffle=args.reshuffle,
        **fields,
    )


def _emit(result: dict) -> int:
    print(json.dumps(result, ensure_ascii=False))
    return 0


def _common(accountant, setting: Setting, **values) -> dict:
    return {
        **values,
        "accountant": accountant.name,
        "neighbouring": setting.neighbouring,
        "sampling": setting.sampling,
        "release": accountant.release,
        "bound": accountant.bound,
        "setting": setting.as_dict(),
    }


def _check_number(name: str, value: float) -> float:
    if value is None or not math.isfinite(value):
        raise DPLabError(name, f"the accountant returned no finite value ({value})")
    return float(value)


def _risk(name: str, settings: list[Setting]) -> dict:
    """The attack-risk reading of the steps of ``settings`` in turn (one setting, or --phases:
    :func:`dplab.accounting.risk.phases_risk`), or the reason none is given."""
    from dplab.accounting import risk

    why = next(filter(None, (risk.unavailable(name, s) for s in settings)), None)
    return {"unavailable": why} if why else risk.phases_risk(settings)


def _phases(args: argparse.Namespace) -> list[Setting]:
    """The phases of --phases FILE; a setting flag beside it is refused (the
    file gives every phase)."""
    for name, _, _ in SETTING_FLAGS:
        if getattr(args, name, None) is not None:
            raise DPLabError(
                "--" + name.replace("_", "-"),
                "give each phase's values in the --phases file, not as flags",
            )
    for flag, value, default in (
        ("--sampling", args.sampling, None),
        ("--neighbouring", args.neighbouring, Neighbouring.ADD_REMOVE),
    ):
        if value != default:
            raise DPLabError(
                flag,
                "give it in the --phases file (its `sampling`/`neighbouring` keys), not as a flag",
            )
    for flag in ("tpr", "fpr", "advantage"):
        if getattr(args, flag, None):
            raise DPLabError(
                f"--{flag}",
                "risk targets are for one homogeneous setting, not --phases (epsilon --risk reads"
                " the risk of phases)",
            )
    from dplab.accounting import phases

    return phases.from_file(args.phases)


def _phases_out(name: str, steps: list[Setting], **values) -> dict:
    return {
        **values,
        "accountant": name,
        "neighbouring": steps[0].neighbouring,
        "sampling": steps[0].sampling,
        "release": accounting.get(name).release,
        "bound": accounting.get(name).bound,
        "phases": [p.as_dict() for p in steps],
    }


def cmd_epsilon(args: argparse.Namespace) -> int:
    if args.phases is not None:
        from dplab.accounting import phases

        steps = _phases(args)
        eps = _check_number("epsilon", phases.epsilon(args.accountant, steps, args.delta))
        out = _phases_out(args.accountant, steps, epsilon=eps, delta=args.delta)
        if args.risk:
            out["risk"] = _risk(args.accountant, steps)
        return _emit(out)
    acc = accounting.get(args.accountant)
    setting = _setting(args, acc)
    eps = _check_number("epsilon", acc.epsilon(setting, args.delta))
    out = _common(acc, setting, epsilon=eps, delta=args.delta)
    if args.risk:
        out["risk"] = _risk(acc.name, [setting])
    return _emit(out)


def cmd_delta(args: argparse.Namespace) -> int:
    acc = accounting.get(args.accountant)
    setting = _setting(args, acc)
    delta = _check_number("delta", acc.delta(setting, args.epsilon))
    out = _common(acc, setting, delta=delta, epsilon=args.epsilon)
    if delta <= DELTA_FLOOR:  # never 0: a Gaussian mechanism is never (ε, 0)-DP
        out["delta_note"] = (
            f"the exact δ is below {DELTA_FLOOR:g} (float64 underflow): {DELTA_FLOOR:g} bounds it"
        )
    return _emit(out)


def _sigma_for_risk(args: argparse.Namespace, acc, setting: Setting) -> dict:
    """σ calibrated to the risk target of --tpr/--fpr or --advantage, with the risk it reaches."""
    from dplab.accounting import risk

    if args.epsilon is not None:
        raise DPLabError(
            "epsilon",
            "calibrate to either --epsilon or a risk target (--tpr/--fpr, --advantage), not both",
        )
    risk.check_target(args.tpr, args.fpr, args.advantage)
    why = risk.unavailable(acc.name, setting)
    if why:
        raise DPLabError("accountant", f"{why}; calibrate to a risk target with --accountant pld")
    sigma = risk.sigma_for_risk(setting, tpr=args.tpr, fpr=args.fpr, advantage=args.advantage)
    target = (
        {"advantage": args.advantage}
        if args.advantage is not None
        else {"tpr": args.tpr, "fpr": args.fpr}
    )
    calibrated = setting.replace(noise_multiplier=sigma)
    out = _common(
        acc, calibrated, noise_multiplier=sigma, target=target, risk=risk.risk(calibrated)
    )
    if args.delta is not None:  # the ε the calibrated σ implies
        out.update(
            epsilon=_check_number("epsilon", acc.epsilon(calibrated, args.delta)), delta=args.delta
        )
    return out


def cmd_sigma(args: argparse.Namespace) -> int:
    if args.phases is not None:
        from dplab.accounting import phases

        steps = _phases(args)
        for key in ("epsilon", "delta"):
            if getattr(args, key) is None:
                raise DPLabError(key, f"--{key} is required with --phases")
        factor = phases.calibrate(args.accountant, steps, args.epsilon, args.delta)
        calibrated = phases.scaled(steps, factor)
        return _emit(
            _phases_out(
                args.accountant,
                calibrated,
                scale=factor,
                epsilon=args.epsilon,
                delta=args.delta,
                noise_multipliers=[p.noise_multiplier for p in calibrated],
            )
        )
    acc = accounting.get(args.accountant)
    # the noise std printed: σ·Δ of one release (gaussian_*), else σ·C on the clipped sum
    setting = _setting(args, acc, also=() if _one_release(acc) else ("clip",))
    if any(v is not None for v in (args.tpr, args.fpr, args.advantage)):
        out = _sigma_for_risk(args, acc, setting)
        sigma = out["noise_multiplier"]
    else:
        for key in ("epsilon", "delta"):
            if getattr(args, key) is None:
                raise DPLabError(
                    key, f"--{key} is required (or a risk target: --tpr with --fpr, or --advantage)"
                )
        sigma = _check_number("noise_multiplier", acc.sigma(setting, args.epsilon, args.delta))
        out = _common(
            acc,
            setting.replace(noise_multiplier=sigma),
            noise_multiplier=sigma,
            epsilon=args.epsilon,
            delta=args.delta,
        )
    if setting.sensitivity is not None:
        out["noise_std"] = units.gaussian_noise_std(sigma, setting.sensitivity)
    elif setting.clip is not None:
        out["noise_std"] = units.noise_std_on_sum(sigma, setting.clip)
    return _emit(out)


#: a setting whose other values every accountant accepts (σ ≥ 4, q = 0.01, convex constants with
#: C ≥ L), to ask each accountant which sampling × neighbouring pairs it is proved for
PROBE = {
    "noise_multiplier": 8.0,
    "steps": 10,
    "dataset_size": 1000,
    "batch_size": 10,
    "clip": 10.0,
    "lr": 0.01,
    "diameter": 1.0,
    "regularization": 0.1,
    "strong_convexity": 0.1,
    "smoothness": 1.0,
    "lipschitz": 1.0,
    "dimension": 10,
    "sensitivity": 1.0,
}


def proved_for(accountant) -> dict[str, list[str]]:
    """sampling -> the neighbouring relations ``accountant.check`` accepts with it, on :data:`PROBE`
    (its required keys only; a refusal naming another key, e.g. a batch size that must divide n,
    does not count against the pair); samplings it refuses with every relation are left out.
    The class attributes ``samplings``/``neighbourings`` alone overstate this: a theorem may
    hold for a sampling with one relation only (amplification), or refuse a listed sampling in
    its checks. An accountant of correlated noise (``mf``) takes no setting: its event's
    samplers (``samplers``)."""
    if accountant.noise != "independent":
        return {sampler: list(relations) for sampler, relations in accountant.samplers.items()}
    keys = set(accountant.requires)
    if keys & {"sampling_rate", "dataset_size", "batch_size"}:
        keys |= {"dataset_size", "batch_size"}  # q = b/n
    out: dict[str, list[str]] = {}
    for sampling in SAMPLINGS:
        fields = {key: PROBE[key] for key in keys if key in PROBE}
        if sampling == Sampling.FULL_BATCH and "batch_size" in fields:
            fields["batch_size"] = fields["dataset_size"]
        for neighbouring in NEIGHBOURINGS:
            try:
                accountant.check(Setting(sampling=sampling, neighbouring=neighbouring, **fields))
            except DPLabError as err:
                if err.key in ("sampling", "neighbouring"):
                    continue  # a refusal of another key is about the probe's values, not the pair
            out.setdefault(sampling, []).append(neighbouring)
    return out


def cmd_accountants(args: argparse.Namespace) -> int:
    listing = []
    for name in accounting.names():
        accountant = accounting.get(name)
        pairs = proved_for(accountant)
        cls = type(accountant)
        listing.append(
            {
                **accountant.describe(),
                "implemented_in": f"{cls.__module__}.{cls.__qualname__}",
                "samplings": list(pairs),
                "neighbourings": [n for n in NEIGHBOURINGS if any(n in v for v in pairs.values())],
                "proved_for": pairs,
            }
        )
    print(json.dumps(listing, indent=2, ensure_ascii=False))
    return 0


_COMMON = (
    " The setting is given with the canonical flags (docs/units.md) below; the JSON output repeats"
    " it and names the accountant, δ, neighbouring relation and sampling it assumed. A setting"
    " outside the accountant's assumptions exits with code 2 and one line saying which assumption"
    " fails."
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "epsilon",
        help="ε of a setting at a given δ",
        description='Print {"epsilon": …} for a training (or one-release) setting at δ.' + _COMMON,
    )
    _add_setting_flags(p)
    p.add_argument("--delta", type=_finite(float, "--delta"), required=True, help="δ in (0, 1)")
    p.add_argument(
        "--phases",
        default=None,
        metavar="FILE",
        help=(
            "a YAML/JSON file of phases (steps, noise_multiplier, sampling_rate or batch_size each;"
            " sampling, neighbouring, dataset_size for all): the ε of their composition (rdp, pld;"
            " with --risk, pld's risk of it)"
        ),
    )
    p.add_argument(
        "--risk",
        action="store_true",
        help="also print the attack's TPR at FPR 0.001, 0.01, 0.1 and its advantage (docs/risk.md; "
        "pld accountant, poisson or full_batch, one setting or --phases; others say why not)",
    )
    p.set_defaults(func=cmd_epsilon)

    p = subparsers.add_parser(
        "delta",
        help="δ of a setting at a given ε",
        description='Print {"delta": …} for a training (or one-release) setting at ε.' + _COMMON,
    )
    _add_setting_flags(p)
    p.add_argument("--epsilon", type=_finite(float, "--epsilon"), required=True, help="ε > 0")
    p.set_defaults(func=cmd_delta)

    p = subparsers.add_parser(
        "sigma",
        help="smallest noise multiplier σ meeting (ε, δ)",
        description=(
            'Print {"noise_multiplier": …}: the smallest σ whose ε at δ is at most the target'
            " (relative precision 1e-5; with --sensitivity or --clip also the absolute noise std);"
            " or, with --tpr/--fpr or --advantage, the smallest σ keeping every attacker within"
            " that risk (pld accountant, docs/risk.md), with the ε it implies at --delta if given."
        )
        + _COMMON,
    )
    _add_setting_flags(p, computed="noise_multiplier")
    p.add_argument("--epsilon", type=_finite(float, "--epsilon"), default=None, help="target ε > 0")
    p.add_argument(
        "--delta", type=_finite(float, "--delta"), default=None, help="target δ in (0, 1)"
    )
    p.add_argument(
        "--tpr",
        type=_finite(float, "--tpr"),
        default=None,
        help="risk target: the attack's TPR at --fpr, in (--fpr, 1)",
    )
    p.add_argument(
        "--fpr", type=_finite(float, "--fpr"), default=None, help="risk target: the FPR, in (0, 1)"
    )
    p.add_argument(
        "--advantage",
        type=_finite(float, "--advantage"),
        default=None,
        help="risk target: the attack's advantage TPR − FPR, in (0, 1)",
    )
    p.add_argument(
        "--phases",
        default=None,
        metavar="FILE",
        help=(
            "a phases file (see `dplab epsilon --help`): one factor on every phase's σ meeting"
            " (ε, δ)"
        ),
    )
    p.set_defaults(func=cmd_sigma)

    p = subparsers.add_parser(
        "accountants",
        help="every registered accountant with its source and assumptions",
        description=(
            "Print, as JSON, every accountant: its source (paper and theorem), the class that"
            " implements it (implemented_in: module.Class; docs/references.md maps each citation to"
            " the code), whether it covers the whole trajectory or only the last iterate, its bound"
            " (upper: a guarantee; lower: the true ε is at least this; comparison: a claim the"
            " setting does not earn), the sampling schemes and neighbouring relations it is proved"
            " for (proved_for: sampling -> the relations it accepts with that sampling, as its own"
            " checks answer), the setting keys it requires, and its other assumptions."
        ),
    )
    p.set_defaults(func=cmd_accountants)
