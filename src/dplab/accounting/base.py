"""The one interface every accountant implements (docs/accountants.md).

An accountant answers three questions for a :class:`~dplab.accounting.setting.Setting`:
ε for a given δ, δ for a given ε, and the smallest noise multiplier σ meeting (ε, δ).
It declares the assumptions under which its answer is valid and refuses, with an
:class:`~dplab.errors.AssumptionError`, any setting outside them: never a silent wrong ε.
For a run's event (:mod:`dplab.accounting.events`) it says whether it bounds it
(:meth:`Accountant.supports`: None, or why not) and ε (:meth:`Accountant.epsilon`).

Subclasses implement :meth:`Accountant.epsilon_curve` (ε for every T of a grid in one
call) and, where they can do better than numerical inversion, :meth:`delta_curve`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Sequence

import numpy as np

if TYPE_CHECKING:
    from dp_accounting.dp_event import DpEvent

from dplab.accounting import memo
from dplab.accounting.roots import bracket, safe_root
from dplab.accounting.setting import SETTING_NUMBERS, Setting, check_delta, check_epsilon
from dplab.errors import AssumptionError, DPLabError
from dplab.schemes import Neighbouring, Sampling

#: Relative tolerance of every calibrated σ: the returned σ meets the target and
#: σ·(1 − SIGMA_RTOL) does not (up to the accountant's own numerical precision).
SIGMA_RTOL = 1e-5
#: the range of σ every calibration searches
SIGMA_MIN, SIGMA_MAX = 1e-6, 1e7
#: what a Setting field adds to the update, for :attr:`Accountant.excludes`
UPDATE_TERMS = {"regularization": "weight decay (001 eq. 17)", "diameter": "projection"}
#: the smallest δ an accountant reports: δ = 0 (pure DP, which no Gaussian
#: noise gives) is never claimed
DELTA_FLOOR = 1e-300
#: the largest ε asked of any accountant (a target to calibrate σ to, or the ε of a δ query): far
#: above any ε worth reporting, and below where e^ε overflows the bounds' own arithmetic
EPSILON_MAX = 1e4
#: the largest count (steps, dataset_size, batch_size, dimension): float64 holds
#: every integer to 2^53 ≈ 9.0e15
COUNT_MAX = 10**15
#: the ranges every accountant resolves, key → (lowest, highest, why): a Setting field, or the
#: ``epsilon`` and ``delta`` of a query.  An accountant's :attr:`Accountant.limits` narrows them
#: (docs/reliability.md); outside, it refuses at once with a :class:`ResolutionError` naming the
#: key, the range and the reason.
LIMITS: dict[str, tuple[float, float, str]] = {
    "noise_multiplier": (SIGMA_MIN, SIGMA_MAX, "the range σ is calibrated in"),
    "steps": (1, COUNT_MAX, "float64 counts exactly only to 2^53"),
    "dataset_size": (1, COUNT_MAX, "float64 counts exactly only to 2^53"),
    "batch_size": (1, COUNT_MAX, "float64 counts exactly only to 2^53"),
    "dimension": (1, COUNT_MAX, "float64 counts exactly only to 2^53"),
    **{
        key: (1e-30, 1e30, "a physical scale; products of a few stay inside float64")
        for key in (
            "clip",
            "lr",
            "diameter",
            "strong_convexity",
            "smoothness",
            "lipschitz",
            "sensitivity",
        )
    },
    "alpha": (
        1.01,
        1e6,
        "the RDP → (ε, δ) conversion needs α > 1.01; orders are searched up to 1e6",
    ),
    "epsilon": (
        0.0,
        EPSILON_MAX,
        "far above any ε worth reporting; e^ε overflows the bounds' arithmetic beyond",
    ),
    "delta": (DELTA_FLOOR, 1.0, "the smallest δ reported"),
}
#: why a required Setting field is needed, where "is required" alone does not say (key → clause)
REQUIRED_WHY = {
    "lipschitz": (
        "the bound analyses the loss's own gradient step, which the clipped update is only when"
        " clipping never acts: give the loss's Lipschitz constant L <= clip (--lipschitz on the"
        " CLI)"
    ),
}
#: what an accountant's ε is: a guarantee ("upper"), a certified "lower" bound on the true ε, or
#: a "comparison" (a claim the setting does not earn, printed next to the guarantee only)
BOUNDS = ("upper", "lower", "comparison")
#: what an ε of each bound but "upper" is, in words
BOUND_WORDS = {
    "lower": "a lower bound on ε",
    "comparison": "a comparison (a claim this setting does not earn)",
}


class ResolutionError(AssumptionError):
    """A setting inside the bound's assumptions that the accountant cannot answer within its
    :data:`LIMITS` (time, memory or float64 precision): refused up front, with the reason."""


class Accountant(ABC):
    """Base class: subclasses set the class attributes and implement ``epsilon_curve``."""

    name: ClassVar[str]
    #: source document (000–004, docs/references.md) and theorem/equation the bound comes from
    source: ClassVar[str]
    #: "trajectory" (every iterate may be released) or "last_iterate" (hidden state)
    release: ClassVar[str] = "trajectory"
    #: the noise of the mechanism it analyses: "independent" in every step (DP-SGD) or "correlated"
    #: (the matrix mechanism); a run reports the accountants of its own
    #: noise (eligibility.exclusion)
    noise: ClassVar[str] = "independent"
    #: sampling schemes and neighbouring relations the bound is proved for
    samplings: ClassVar[tuple[str, ...]] = (Sampling.POISSON,)
    neighbourings: ClassVar[tuple[str, ...]] = tuple(Neighbouring)
    #: Setting fields that must be given
    requires: ClassVar[tuple[str, ...]] = ("noise_multiplier", "sampling_rate", "steps")
    #: Setting fields that must be unset (or 0): update terms the bound's theorem does not have
    excludes: ClassVar[tuple[str, ...]] = ()
    #: Setting fields the bound reads when given, besides ``requires`` and ``excludes``: q may be
    #: given as b/n.  Every other field is :attr:`unused`.
    reads: ClassVar[tuple[str, ...]] = ("sampling_rate", "batch_size", "dataset_size")
    #: further assumptions, in words (checked in :meth:`check_setting`)
    assumptions: ClassVar[tuple[str, ...]] = ()
    #: one of :data:`BOUNDS`; only "upper" may calibrate σ or be claimed as a guarantee
    bound: ClassVar[str] = "upper"
    #: this accountant's own ranges, key → (lowest, highest, why), narrowing :data:`LIMITS`
    limits: ClassVar[dict[str, tuple[float, float, str]]] = {}

    @property
    def unused(self) -> tuple[str, ...]:
        """The Setting fields this bound never reads (none of ``requires``, ``excludes``,
        ``reads``): ``dplab epsilon|delta|sigma`` refuses them, since the answer would be the same
        without them (docs/reliability.md)."""
        read = {*self.requires, *self.excludes, *self.reads}
        return tuple(name for name in SETTING_NUMBERS if name not in read)

    # ----------------------------------------------------------------- validity
    def check(self, setting: Setting, *, steps_needed: bool = True) -> None:
        """Raise :class:`AssumptionError` unless ``setting`` satisfies every assumption."""
        for key in self.requires:
            if key == "steps" and not steps_needed:
                continue
            if getattr(setting, key) is None:
                why = REQUIRED_WHY.get(key)
                raise AssumptionError(
                    self.name, key, f"is required: {why}" if why else "is required"
                )
        if setting.sampling not in self.samplings:
            raise AssumptionError(
                self.name,
                "sampling",
                f"must be one of {', '.join(self.samplings)} for this bound; got"
                f" {setting.sampling!r}",
            )
        for key in self.excludes:
            if getattr(setting, key):
                raise AssumptionError(
                    self.name,
                    key,
                    f"must be unset: the update this bound analyses has no "
                    f"{UPDATE_TERMS[key]}; got {getattr(setting, key)}",
                )
        if setting.neighbouring not in self.neighbourings:
            raise AssumptionError(
                self.name,
                "neighbouring",
                f"must be one of {', '.join(self.neighbourings)} for this bound; got"
                f" {setting.neighbouring!r}",
            )
        for key in {**LIMITS, **self.limits}.keys() - {
            "epsilon",
            "delta",
            *self.unused,
        }:  # the keys it reads
            self.check_limit(key, getattr(setting, key))
        self.check_setting(setting)

    def resolved(self, key: str) -> tuple[float, float, str]:
        """(lowest, highest, why): the range of ``key`` this accountant resolves."""
        return self.limits.get(key, LIMITS.get(key, (-math.inf, math.inf, "")))

    def check_limit(self, key: str, value) -> None:
        """Raise :class:`ResolutionError` if ``value`` (not None) lies outside
        :meth:`resolved` (key)."""
        lo, hi, why = self.resolved(key)
        if value is not None and not lo <= value <= hi:
            shown = value if isinstance(value, int) else float(value)  # every digit: 1.0000001
            raise self.too_far(
                key, f"must lie in [{lo:g}, {hi:g}] for this accountant ({why}); got {shown!r}"
            )

    def too_far(self, key: str, message: str) -> ResolutionError:
        """A :class:`ResolutionError` of this accountant (to ``raise``)."""
        return ResolutionError(self.name, key, message)

    def check_setting(self, setting: Setting) -> None:
        """Accountant-specific assumptions; raise :class:`AssumptionError` on violation."""

    def check_clipping_inactive(self, setting: Setting) -> None:
        """For bounds on the loss's own gradient step (pabi, langevin, ye_shokri, which require both
        ``clip`` and ``lipschitz``): clipping may not act, so lipschitz ≤ clip (clipping changes the
        gradient field and breaks convexity)."""
        if setting.lipschitz > setting.clip:
            raise self.fail(
                "clip",
                f"must be >= lipschitz ({setting.lipschitz}) so that clipping is inactive "
                f"(clipping changes the gradient field); got {setting.clip}",
            )

    def fail(self, key: str, message: str) -> AssumptionError:
        """An :class:`AssumptionError` of this accountant (to ``raise``)."""
        return AssumptionError(self.name, key, message)

    # ------------------------------------------------------------------ answers
    @abstractmethod
    def _epsilon_curve(self, setting: Setting, delta: float, steps: np.ndarray) -> np.ndarray:
        """ε(T) for each T in ``steps`` (sorted, ≥ 1); the setting is already checked."""

    def _delta_curve(self, setting: Setting, epsilon: float, steps: np.ndarray) -> np.ndarray:
        """δ(T) for each T; default: invert ε(δ) numerically (override where closed)."""
        return np.array(
            [self._delta_by_inversion(setting.replace(steps=int(t)), epsilon) for t in steps]
        )

    def epsilon_curve(
        self, setting: Setting, delta: float, steps: Sequence[int] | None = None
    ) -> np.ndarray:
        """ε for every T in ``steps`` (default 1..setting.steps) at fixed δ, in one call."""
        delta = check_delta(delta)
        self.check_limit("delta", delta)
        grid = self._grid(setting, steps)
        self.check(setting.replace(steps=int(grid.max())))
        # the accountant by its class and its own fields: a new instance asks the same question
        who = (type(self), repr(vars(self)))
        question = ("epsilon_curve", who, repr(setting), repr(delta), grid.tobytes())
        return memo.answer(question, lambda: self._finite_curve(setting, delta, grid))

    def _finite_curve(self, setting: Setting, delta: float, grid: np.ndarray) -> np.ndarray:
        """:meth:`_epsilon_curve` of a checked setting, refused unless every ε is finite and ≥ 0."""
        eps = self._answer(lambda: self._epsilon_curve(setting, delta, grid), setting)
        if not np.all(np.isfinite(eps) & (eps >= 0)):
            raise self.too_far(
                "epsilon",
                f"the bound gives no finite ε at δ = {delta:g} for this setting "
                f"({_described(setting)}): it lies outside what this accountant resolves",
            )
        return eps

    def delta_curve(
        self, setting: Setting, epsilon: float, steps: Sequence[int] | None = None
    ) -> np.ndarray:
        """δ for every T in ``steps`` (default 1..setting.steps) at fixed ε, in one
        call; never below :data:`DELTA_FLOOR` (an exact δ under 1e-300 is reported as
        that bound, never as 0)."""
        epsilon = check_epsilon(epsilon)
        self.check_limit("epsilon", epsilon)
        grid = self._grid(setting, steps)
        self.check(setting.replace(steps=int(grid.max())))
        delta = self._answer(lambda: self._delta_curve(setting, epsilon, grid), setting)
        if np.any(np.isnan(delta)):
            raise self.too_far(
                "delta",
                f"the bound gives no δ at ε = {epsilon:g} for this setting "
                f"({_described(setting)}): it lies outside what this accountant resolves",
            )
        return np.clip(delta, DELTA_FLOOR, 1.0)

    def _answer(self, compute, setting: Setting) -> np.ndarray:
        """``compute()`` as a float array; float64 overflow or division by zero (a
        setting at the edge of every range) becomes a :class:`ResolutionError` naming the
        setting, not a traceback."""
        try:
            with np.errstate(over="ignore", divide="ignore", under="ignore"):
                return np.asarray(compute(), dtype=float)
        except (OverflowError, ZeroDivisionError, FloatingPointError) as err:
            raise self.too_far(
                "setting",
                f"float64 arithmetic failed ({type(err).__name__}: {err}) at "
                f"{_described(setting)}: outside what this accountant resolves",
            ) from err

    def epsilon(
        self, query: Setting | DpEvent, delta: float, neighbouring: str = Neighbouring.ADD_REMOVE
    ) -> float:
        """ε at δ of the whole run (T = setting.steps), or of an event under ``neighbouring``
        (:meth:`event_epsilon`; a Setting carries its own relation)."""
        if not isinstance(query, Setting):  # a dp_accounting event (imported only where used)
            self.check_limit("delta", check_delta(delta))
            return self.event_epsilon(query, delta, neighbouring)
        return float(self.epsilon_curve(query, delta, [self._steps(query)])[0])

    # ------------------------------------------------------------------- events
    def supports(self, event: DpEvent, neighbouring: str = Neighbouring.ADD_REMOVE) -> str | None:
        """None if this accountant bounds ``event`` under ``neighbouring``, else why not (one line:
        the declared assumption the event fails, as :meth:`check` words it)."""
        try:
            self.parts(event, neighbouring)
        except DPLabError as err:
            return str(err)
        return None

    def parts(self, event: DpEvent, neighbouring: str) -> list[Setting]:
        """The checked settings this accountant accounts ``event`` as: one, the event's
        :func:`~dplab.accounting.events.view` (accountants that compose phases override)."""
        setting = self.setting_of(event, neighbouring)
        self.check(setting)
        return [setting]

    def setting_of(self, event: DpEvent, neighbouring: str) -> Setting:
        """The event's view (:func:`~dplab.accounting.events.view`), refused as this accountant's
        :class:`AssumptionError` where it has none; a hidden-state bound (``release``
        "last_iterate") needs a :class:`~dplab.accounting.events.HiddenStateDpEvent`."""
        from dplab.accounting import events  # dp_accounting's events: imported where used

        if self.release == "last_iterate" and not isinstance(event, events.HiddenStateDpEvent):
            raise self.fail(
                "event",
                "this bound covers the last iterate only, a HiddenStateDpEvent; "
                f"the {type(event).__name__} releases every step",
            )
        try:
            return events.view(event, neighbouring)
        except DPLabError as err:
            raise self.fail(err.key, err.message) from None

    def event_epsilon(
        self, event: DpEvent, delta: float, neighbouring: str = Neighbouring.ADD_REMOVE
    ) -> float:
        """ε at δ of ``event``: the ε of its one setting (:meth:`parts`)."""
        (setting,) = self.parts(event, neighbouring)
        return self.epsilon(setting, delta)

    def delta(self, setting: Setting, epsilon: float) -> float:
        """δ of the whole run (T = setting.steps) at ε."""
        return float(self.delta_curve(setting, epsilon, [self._steps(setting)])[0])

    def sigma(
        self, setting: Setting, epsilon: float, delta: float, start: float | None = None
    ) -> float:
        """Smallest noise multiplier σ with ε(σ) ≤ ``epsilon`` at ``delta`` (T = setting.steps),
        found by :meth:`noise_needed`; upper bounds only (a lower bound or a
        comparison is refused)."""
        self.require_upper()
        return self.noise_needed(setting, epsilon, delta, start)

    def require_upper(self) -> None:
        """Refuse to calibrate σ with a lower bound or a comparison (:attr:`bound`)."""
        if self.bound != "upper":
            raise self.fail(
                "accountant",
                f"gives {BOUND_WORDS[self.bound]}, not a guarantee: σ can only be calibrated with"
                " an upper bound (`dplab accountants` lists each accountant's bound)",
            )

    def noise_needed(
        self,
        setting: Setting,
        epsilon: float,
        delta: float,
        start: float | None = None,
        rtol: float = SIGMA_RTOL,
    ) -> float:
        """The smallest σ at which this accountant's ε(σ) meets ``epsilon`` at ``delta``.

        For an upper bound it is the calibrated σ (:meth:`sigma`); for a lower bound the σ where the
        search finds it reaching the target (the lower bounds are not exactly monotone in σ: their
        binned losses move them by up to 2e-3 in ε, so a σ slightly below may reach it too); for a
        comparison it is what the comparison's claim would need.
        From ``start`` (default :meth:`_sigma_start`), step outward in log σ by 2 %, widening
        ×4, until the target is bracketed (:func:`~dplab.accounting.roots.bracket`); then (unless
        the bracket is already narrower than ``rtol``) Brent's method in log σ to relative tolerance
        ``rtol`` (default :data:`SIGMA_RTOL`), returning the side that meets the target.  Every ε
        evaluation is memoized; a σ outside the bound's validity counts as not meeting the target.
        The search starts no lower than :meth:`sigma_floor`; a σ refused only because the accountant
        cannot resolve it (:class:`ResolutionError`) also counts as not meeting it, but when the
        smallest σ meeting the target may lie among such σ the search refuses instead of answering.
        """
        epsilon, delta = check_epsilon(epsilon), check_delta(delta)
        self.check_limit("epsilon", epsilon)
        self.check_limit("delta", delta)
        try:  # assumptions no σ can fix are reported at once; σ's own range is searched
            self.check(setting.replace(noise_multiplier=1.0))
        except AssumptionError as err:
            if err.key != "noise_multiplier":
                raise
        cache: dict[float, float] = {}
        unresolved: dict[float, ResolutionError] = {}

        def excess(log_sigma: float) -> float:
            if log_sigma not in cache:
                try:
                    sigma = min(
                        max(math.exp(log_sigma), SIGMA_MIN), SIGMA_MAX
                    )  # exp(log(SIGMA_MAX)) rounds above it
                    value = self.epsilon(setting.replace(noise_multiplier=sigma), delta) - epsilon
                except ResolutionError as err:
                    value, unresolved[log_sigma] = math.inf, err
                except AssumptionError:
                    value = math.inf
                cache[log_sigma] = value
            return cache[log_sigma]

        def answer(sigma: float) -> float:
            """``sigma``, unless the σ just below it was only refused for resolution (then the
            smallest σ meeting the target may lie there: refuse rather than return a σ that is
            not the smallest). Resolution refusals hit small σ: with none met in the search,
            every σ above it resolves."""
            if not unresolved:
                return sigma
            below = math.log(sigma) - rtol
            excess(below)
            if below in unresolved:
                raise self.too_far(
                    "epsilon",
                    f"the σ reaching ε = {epsilon:g} at δ = {delta:g} lies below "
                    f"σ = {sigma:.6g}, where {self._reason(unresolved[below])}",
                )
            return sigma

        floor = self.sigma_floor(setting)
        x = math.log(
            min(max(start or self._sigma_start(setting, epsilon, delta), floor), SIGMA_MAX)
        )
        lo, hi = bracket(lambda v: excess(v) <= 0, x, math.log(floor), math.log(SIGMA_MAX))
        if lo is None:  # the smallest σ searched already meets the target
            if floor > SIGMA_MIN:
                raise self.too_far(
                    "epsilon",
                    f"σ = {floor:.6g}, the smallest σ this accountant resolves here, "
                    f"already meets ε = {epsilon:g} at δ = {delta:g}: the smallest σ "
                    f"meeting it lies below, beyond what it resolves",
                )
            return SIGMA_MIN
        if hi is None:  # not even SIGMA_MAX meets it
            top = excess(math.log(SIGMA_MAX)) + epsilon
            if unresolved and not math.isfinite(top):  # a σ may exist beyond what it resolves
                last = max(unresolved)
                raise self.too_far(
                    "epsilon",
                    f"no σ ≤ {SIGMA_MAX:g} that this accountant resolves reaches "
                    f"ε = {epsilon:g} at δ = {delta:g}; at σ = {math.exp(last):.6g}: "
                    f"{self._reason(unresolved[last])}",
                )
            raise self.fail(
                "epsilon",
                f"no σ ≤ {SIGMA_MAX:g} reaches ε = {epsilon} at δ = {delta}, T = {setting.steps}"
                + (
                    f": even σ = {SIGMA_MAX:g} gives ε = {top:.6g}, this bound's floor at this δ"
                    " (an accountant with a lower floor, e.g. rdp or pld, may reach it)"
                    if math.isfinite(top)
                    else ""
                ),
            )
        if hi - lo <= rtol:
            return answer(math.exp(hi))
        sigma = safe_root(
            lambda v: min(excess(v), 1e6),
            lo,
            hi,
            xtol=rtol / 4,
            rtol=1e-12,
            answer=math.exp,
            misses=lambda s: excess(math.log(s)) > 0,
            nudge=lambda s: s * (1 + rtol / 4),
        )
        return answer(sigma)

    def _reason(self, err: AssumptionError) -> str:
        """An error of this accountant as a clause (its line without the accountant's name)."""
        return str(err).removesuffix(f" (accountant {self.name!r})")

    def sigma_floor(self, setting: Setting) -> float:
        """The smallest σ this accountant resolves for ``setting`` (the σ search starts no lower);
        default: the lower end of its ``noise_multiplier`` range."""
        return self.resolved("noise_multiplier")[0]

    def sigma_curve(
        self,
        setting: Setting,
        epsilon: float,
        delta: float,
        steps: Sequence[int],
        hint: Sequence[float] | None = None,
    ) -> np.ndarray:
        """:meth:`sigma` for every T of the increasing grid ``steps`` (see
        :meth:`noise_needed_curve`); upper bounds only."""
        self.require_upper()
        return self.noise_needed_curve(setting, epsilon, delta, steps, hint)

    def noise_needed_curve(
        self,
        setting: Setting,
        epsilon: float,
        delta: float,
        steps: Sequence[int],
        hint: Sequence[float] | None = None,
        rtol: float = SIGMA_RTOL,
    ) -> np.ndarray:
        """:meth:`noise_needed` for every T of the increasing grid ``steps``, each started from the
        previous answer: carried along ``hint`` (another accountant's σ(T) on the same grid, whose
        ratio to this one changes slowly) or along the log-log slope of the last two points."""
        grid = [int(t) for t in self._grid(setting, steps)]
        out: list[float] = []
        for i, t in enumerate(grid):
            if hint is not None:
                guess = hint[i] * (out[-1] / hint[i - 1] if out else 1.0)
            elif len(out) >= 2:
                slope = math.log(out[-1] / out[-2]) / math.log(grid[i - 1] / grid[i - 2])
                guess = out[-1] * (t / grid[i - 1]) ** slope
            elif out:
                guess = out[-1] * math.sqrt(t / grid[i - 1])
            else:
                guess = None
            out.append(
                self.noise_needed(setting.replace(steps=t), epsilon, delta, start=guess, rtol=rtol)
            )
        return np.array(out)

    def _sigma_start(self, setting: Setting, epsilon: float, delta: float) -> float:
        """Where the σ search starts; override with a cheap estimate where
        evaluations are costly."""
        return 1.0

    # ------------------------------------------------------------------ helpers
    def _grid(self, setting: Setting, steps: Sequence[int] | None) -> np.ndarray:
        if steps is None:
            self.check_limit("steps", self._steps(setting))
            return np.arange(1, self._steps(setting) + 1)
        grid = np.asarray(steps, dtype=float)
        if grid.ndim != 1 or grid.size == 0 or np.any(grid < 1) or np.any(grid != np.round(grid)):
            raise self.fail("steps", "the grid must be a non-empty list of integers >= 1")
        self.check_limit("steps", grid.max())
        if np.any(np.diff(grid) < 0):
            raise self.fail("steps", "the grid must be sorted in increasing order")
        return np.asarray(steps).astype(np.int64)

    def _steps(self, setting: Setting) -> int:
        if setting.steps is None:
            raise self.fail("steps", "is required")
        return int(setting.steps)

    def _delta_by_inversion(self, setting: Setting, epsilon: float) -> float:
        """δ such that ε(δ) = ``epsilon``, by root finding in log δ (ε decreases in δ)."""

        def gap(log_delta: float) -> float:
            try:
                return (
                    self._epsilon_curve(setting, math.exp(log_delta), np.array([setting.steps]))[0]
                    - epsilon
                )
            except AssumptionError:
                # the bound cannot certify any ε at this δ (it refuses large ε):
                # treat as above target
                return 1e12

        lo, hi = math.log(DELTA_FLOOR), math.log(1 - 1e-12)
        if gap(hi) > 0:
            return 1.0
        if gap(lo) <= 0:
            return DELTA_FLOOR
        # the side that meets ε
        return math.exp(
            safe_root(
                gap, lo, hi, xtol=1e-10, rtol=1e-10, nudge=lambda x: x + 1e-10 * max(1.0, abs(x))
            )
        )

    def describe(self) -> dict:
        """What ``dplab accountants`` prints for this accountant."""
        return {
            "name": self.name,
            "source": self.source,
            "release": self.release,
            "bound": self.bound,
            "noise": self.noise,
            "samplings": list(self.samplings),
            "neighbourings": list(self.neighbourings),
            "requires": list(self.requires),
            "excludes": list(self.excludes),
            "reads": [name for name in SETTING_NUMBERS if name not in self.unused],
            "assumptions": list(self.assumptions),
            "limits": {key: list(self.resolved(key)) for key in {**LIMITS, **self.limits}},
        }


def _described(setting: Setting) -> str:
    """The numbers of a setting, for a message: "σ = 0.01, q = 0.01, T = 100"."""
    short = {
        "noise_multiplier": "σ",
        "sampling_rate": "q",
        "steps": "T",
        "dataset_size": "n",
        "batch_size": "b",
    }
    return ", ".join(
        f"{short.get(k, k)} = {v:g}"
        for k, v in setting.as_dict().items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    )
