"""``pld``: tight privacy-loss-distribution accounting over ``dp_accounting`` (004 §3.3).

The units, the settings it supports and its phases are the adapters'
(:mod:`dplab.accounting.dp_accounting_adapters`): dp_accounting's PLD with ``REPLACE_ONE`` shifts
a record's contribution from +C to −C itself (``privacy_loss_mechanism``: mu(x ± sensitivity)),
so it gets σ unchanged. dp_accounting's ``pld`` package (with scipy.stats) is imported where a PLD
is built: planning a config reads this class (its bound, the settings it supports) without it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting import dp_event, privacy_accountant

from dplab import units
from dplab.accounting import memo, pld_curve, pld_tilted
from dplab.accounting.base import SIGMA_MAX
from dplab.accounting.dp_accounting_adapters import (
    ADD_REMOVE,
    REPLACE_ONE,
    DpAccountingAdapter,
    RdpAccountant,
    bracket_only,
)
from dplab.accounting.gaussian import gaussian_delta, gaussian_epsilon, sigma_analytic
from dplab.accounting.roots import bisect
from dplab.accounting.setting import Setting, check_delta
from dplab.errors import AssumptionError
from dplab.schemes import Neighbouring, Sampling

#: the most bins the discretized PLD of one Poisson step may hold: dp_accounting builds it at ~7 µs
#: a bin (2^19: about 4 s, reached near σ = 0.2); σ = 0.03, q = 0.01 would need 8.8e6 bins (92 s)
PLD_STEP_BINS = 2**19
#: the coarsest discretization interval pld uses (2 × dp_accounting's default: σ = 0.3, q = 0.3,
#: replace_one needs 1.2e-4)
PLD_DISC_MAX = 2e-4
#: the most bins of dp_accounting's FFT composition (:class:`pld_curve.ComposedPmf`)
#: computed for a guess of ε; beyond, :class:`GaussianGuess` (FFT buffers of 16 bytes a bin;
#: 2^22: about 0.3 GB at peak)
PLD_BINS = 2**22


@functools.cache
def _hermite() -> tuple[np.ndarray, np.ndarray]:
    """The 200 Gauss–Hermite nodes and weights (normalized) of :func:`loss_std`, computed once."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(200)
    return nodes, weights / weights.sum()


def loss_std(setting: Setting) -> float:
    """The standard deviation of one Poisson step's privacy loss L = log(p/q)(x), x ~ p, in the
    "remove" direction (record at +1 against at 0; replace_one: at +1 against at −1), σ = std/C:
    Gauss–Hermite quadrature of each mixture component, 200 nodes."""
    sigma, q = setting.noise_multiplier, setting.sampling_rate
    other = -1.0 if setting.neighbouring == Neighbouring.REPLACE_ONE else None
    nodes, weights = _hermite()

    def log_ratio(z: np.ndarray) -> np.ndarray:
        """log((1 − q) + q·e^z): log1p(q·expm1(z)), or where e^z overflows (tiny σ) the same as
        a log-sum-exp."""
        with np.errstate(over="ignore", divide="ignore"):
            near = np.log1p(q * np.expm1(z))
            return np.where(np.isfinite(near), near, np.logaddexp(np.log1p(-q), np.log(q) + z))

    moments = np.zeros(2)
    for weight, mean in ((1 - q, 0.0), (q, 1.0)):
        x = mean + sigma * nodes
        up = log_ratio((2 * x - 1) / (2 * sigma**2))  # log((1 − q) + q·N(1)/N(0))
        down = 0.0 if other is None else log_ratio((-2 * x - 1) / (2 * sigma**2))
        loss = up - down
        moments += weight * np.array([weights @ loss, weights @ loss**2])
    return math.sqrt(max(moments[1] - moments[0] ** 2, 0.0))


def _dense(pld) -> list:
    """The dense PMFs of a dp_accounting PLD: (remove, add), or remove alone where symmetric."""
    # dp_accounting's own state (tests/test_dependencies.py)
    pmfs = [pld._pmf_remove] + ([] if pld._symmetric else [pld._pmf_add])  # noqa: SLF001
    return [p.to_dense_pmf() for p in pmfs]


def _tilted(dense) -> pld_tilted.TiltedPmf:
    """:class:`pld_tilted.TiltedPmf` of a dp_accounting ``DensePLDPmf``."""
    return pld_tilted.TiltedPmf(
        dense._probs, dense._lower_loss, dense._infinity_mass, dense._discretization
    )  # noqa: SLF001


def _variance(pmf: pld_tilted.TiltedPmf) -> float:
    """The variance of one step's finite privacy loss (its mass at infinity left out)."""
    losses = (pmf.lower + pmf.index) * pmf.disc
    weights = np.exp(pmf.log_p - pmf.log_p.max())
    weights = weights / weights.sum()
    mean = float(weights @ losses)
    return float(weights @ (losses - mean) ** 2)


class GaussianGuess:
    """A guess of ε(δ) of T steps where dp_accounting's FFT window would exceed :data:`PLD_BINS`:
    the Gaussian mechanism whose privacy loss has the composed PMF's variance, T·Var[L] = μ² (the
    central limit of the composition; Dong, Roth & Su 2022, Thm 3.5).  Only a tilt point."""

    def __init__(self, composed: pld_curve.ComposedPmf):
        losses = (composed.lower0 + np.arange(len(composed.probs))) * composed.disc
        weights = composed.probs / composed.probs.sum()
        mean = float(weights @ losses)
        self.variance = float(weights @ (losses - mean) ** 2)

    def epsilons(
        self, steps: np.ndarray, delta: float, floor: np.ndarray | None = None
    ) -> np.ndarray:
        eps = gaussian_epsilon(delta, np.sqrt(np.asarray(steps, dtype=float) * self.variance))
        return eps if floor is None else np.maximum(eps, floor)


class PldAccountant(DpAccountingAdapter):
    """Tight privacy-loss-distribution accounting (Doroshenko et al. 2022), via dp_accounting.

    full_batch: T Gaussian steps of μ = 1/σ_eff compose to exactly one Gaussian mechanism of μ√T
    (Dong, Roth & Su 2022, Cor. 3.3; dp_accounting itself composes a ``GaussianDpEvent`` T times
    so), whose exact profile (:func:`gaussian_delta`, 000 §II) the discretized PLD only approximates
    from above: it is used directly, exact and in constant time (the PLD of σ = 0.6, T = 1000 takes
    dp_accounting minutes).  Poisson: the discretized PLD, refused where it would exceed
    :data:`PLD_STEP_BINS` (one step) or its certified read-off
    :data:`pld_tilted.WINDOW_MAX` (T steps)."""

    name = "pld"
    source = "004 §3.3 footnote (PLD accounting of dp_accounting, Doroshenko et al. 2022)"
    supported = (
        (Sampling.POISSON, Neighbouring.ADD_REMOVE),
        (Sampling.POISSON, Neighbouring.REPLACE_ONE),
        (Sampling.FULL_BATCH, Neighbouring.ADD_REMOVE),
        (Sampling.FULL_BATCH, Neighbouring.REPLACE_ONE),
    )
    assumptions = (
        "every intermediate iterate may be released (composition)",
        (
            "supported: poisson and full_batch with either relation; without_replacement refused "
            "(no such event in dp_accounting's PLD); shuffle refused (no amplification proved)"
        ),
        (
            "poisson: pessimistic discretization (interval 1e-4, refined to a quarter of one"
            " step's loss std where smaller, coarsened up to PLD_DISC_MAX where one step would"
            f" exceed {PLD_STEP_BINS} bins), read off with certified error bounds (pld_tilted): an"
            " upper bound on the exact ε; refused beyond PLD_DISC_MAX or where the read-off's"
            f" window would exceed {pld_tilted.WINDOW_MAX} bins (small σ, huge T)"
        ),
        "full_batch: the exact ε of one Gaussian mechanism of μ√T (T Gaussian steps composed)",
    )
    limits = {
        "delta": (
            1e-12,
            1.0,
            "the smallest δ checked against certified brackets of the true ε "
            "(tests/test_certified_pld_rdp.py)",
        )
    }
    #: discretization of the privacy loss; dp_accounting's default
    value_discretization_interval = 1e-4

    @staticmethod
    def step(setting: Setting) -> tuple[dp_event.DpEvent, privacy_accountant.NeighboringRelation]:
        """One step's ``DpEvent`` (σ = std/C; dp_accounting doubles the shift for REPLACE_ONE)."""
        relation = ADD_REMOVE if setting.neighbouring == Neighbouring.ADD_REMOVE else REPLACE_ONE
        gaussian = dp_event.GaussianDpEvent(setting.noise_multiplier)
        if setting.sampling == Sampling.FULL_BATCH:
            return gaussian, relation
        return dp_event.PoissonSampledDpEvent(setting.sampling_rate, gaussian), relation

    def event_epsilon(self, event, delta, neighbouring=Neighbouring.ADD_REMOVE):
        """One setting's ε; of phases that each see every record (:meth:`one_gaussian`) the exact ε
        of one Gaussian mechanism, of other phases :meth:`phases_epsilon` (module docstring)."""
        settings = self.parts(event, neighbouring)
        if len(settings) == 1:
            return self.epsilon(settings[0], delta)
        if all(self.one_gaussian(s) for s in settings):
            mu = self.full_batch_phases_mu(settings)
            return float(gaussian_epsilon(check_delta(delta), np.array([mu]))[0])
        return self.phases_epsilon(settings, delta)

    def phases_epsilon(self, settings: list[Setting], delta: float) -> float:
        """The certified ε at δ of the phases composed: each phase's one-step PMF pair discretized
        pessimistically at one shared interval (:meth:`shared_discretization`; again at 1e-4 where
        that read-off fails: :meth:`_intervals`), the phases' PMFs
        composed in one tilted FFT per direction (:class:`pld_tilted.Composition`) and ε read off
        with its error bounds; the larger of the pair (the add direction read only where its δ at
        the remove direction's ε exceeds δ).  The tilt's first guess is the Gaussian mechanism of
        the composition's loss variance, Σ T_i Var[L_i] = μ² (Dong, Roth & Su 2022, Thm 3.5)."""
        delta = check_delta(delta)

        def at(disc):
            pairs = [[_tilted(d) for d in _dense(self.one_step(s, disc))] for s in settings]
            eps = -math.inf
            for direction in range(max(len(pair) for pair in pairs)):
                pmfs = [pair[min(direction, len(pair) - 1)] for pair in pairs]  # symmetric: one
                composition = pld_tilted.Composition([(p, s.steps) for p, s in zip(pmfs, settings)])
                if math.isfinite(eps) and composition.delta(eps) <= delta:
                    continue
                variance = sum(s.steps * _variance(p) for p, s in zip(pmfs, settings))
                guess = float(gaussian_epsilon(delta, np.array([math.sqrt(variance)]))[0])
                eps = max(eps, composition.epsilon(delta, guess))
            return eps

        try:
            return float(self._intervals(self.shared_discretization(settings), at))
        except pld_tilted.TooWide as err:
            raise self.too_far(
                "steps",
                f"the certified read-off of the phases composed needs a window of "
                f"{err.bins:.3g} bins (limit WINDOW_MAX = {pld_tilted.WINDOW_MAX}): beyond "
                f"what pld resolves; rdp composes phases",
            ) from None

    def shared_discretization(self, settings: list[Setting]) -> float:
        """One interval for the phases' PMFs (a convolution needs one): the finest any phase asks
        for (:meth:`discretization`), coarsened where a phase's one-step PMF would exceed
        :data:`PLD_STEP_BINS` bins; one phase's own interval for phases equal apart from T, and
        for one setting its :meth:`discretization`.  Refused beyond :data:`PLD_DISC_MAX`, naming
        the phase."""
        if len(settings) == 1:
            return self.discretization(settings[0])
        fine = min(min(self.value_discretization_interval, loss_std(s) / 4) for s in settings)
        widths = [self.step_width(s) / (PLD_STEP_BINS - 2) for s in settings]
        disc = max(fine, *widths)
        if disc > self.coarsest():
            i = int(np.argmax(widths))
            raise self.too_far(
                f"phases[{i}].noise_multiplier",
                f"the PLD of one step at σ = {settings[i].noise_multiplier:g}, q = "
                f"{settings[i].sampling_rate:g} would need an interval of {disc:.3g} to fit "
                f"PLD_STEP_BINS = {PLD_STEP_BINS} bins (limit PLD_DISC_MAX = {self.coarsest():g}): "
                f"σ this small is beyond what pld resolves; rdp composes phases",
            )
        return disc

    @staticmethod
    def one_gaussian(setting: Setting) -> bool:
        """Whether every step sees every record: full_batch, or Poisson at q = 1 (the same
        mechanism), whose T steps are exactly one Gaussian mechanism (:meth:`full_batch_mu`)."""
        return setting.sampling == Sampling.FULL_BATCH or (
            setting.sampling == Sampling.POISSON and setting.sampling_rate == 1.0
        )

    @staticmethod
    def full_batch_mu(setting: Setting, steps) -> np.ndarray:
        """μ√T of T full-batch steps: one Gaussian mechanism (class docstring)."""
        return np.sqrt(np.asarray(steps, dtype=float)) / units.effective_noise_multiplier(
            setting.noise_multiplier, setting.neighbouring
        )

    @classmethod
    def full_batch_phases_mu(cls, settings: list[Setting]) -> float:
        """μ = √(Σᵢ μᵢ²) of phases that each see every record (:meth:`one_gaussian`), μᵢ their
        :meth:`full_batch_mu`: one Gaussian mechanism (Dong, Roth & Su 2022, Cor. 3.3)."""
        return math.sqrt(sum(float(cls.full_batch_mu(s, [s.steps])[0]) ** 2 for s in settings))

    def step_width(self, setting: Setting) -> float:
        """The widest privacy-loss range of the one-step PLD over the pair, from dp_accounting's own
        truncation bounds, without building it."""
        from dp_accounting.pld import privacy_loss_mechanism

        adjacency = privacy_loss_mechanism.AdjacencyType
        pairs = (
            (adjacency.REMOVE, adjacency.ADD)
            if setting.neighbouring == Neighbouring.ADD_REMOVE
            else (adjacency.REPLACE,)
        )
        widths = []
        for kind in pairs:
            bounds = privacy_loss_mechanism.GaussianPrivacyLoss(
                setting.noise_multiplier,
                sampling_prob=setting.sampling_rate,
                adjacency_type=kind,
            ).connect_dots_bounds()
            widths.append(bounds.epsilon_upper - bounds.epsilon_lower)
        return max(widths)

    def coarsest(self) -> float:
        """The coarsest discretization interval used: :data:`PLD_DISC_MAX`, or the class's own
        interval if coarser."""
        return max(PLD_DISC_MAX, self.value_discretization_interval)

    def discretization(self, setting: Setting) -> float:
        """The PLD's discretization interval: :attr:`value_discretization_interval`, refined to a
        quarter of one step's privacy-loss standard deviation (:func:`loss_std`) where that is
        smaller (large σ, small q: at σ = 20, q = 1e-4 one step's loss has std 5e-6, and three bins
        of 1e-4 inflate it 4-fold, and ε with it), and coarsened where the one-step PLD would exceed
        :data:`PLD_STEP_BINS` bins (small σ) so that it fits.  Any interval gives an upper bound
        (pessimistic discretization); connecting the dots adds at most disc²/4 to each step's
        variance; where the refined interval's read-off fails, ε and δ are read again at the
        class's own (:meth:`_intervals`).  Refused beyond :data:`PLD_DISC_MAX`."""
        fine = min(self.value_discretization_interval, loss_std(setting) / 4)
        disc = max(fine, self.step_width(setting) / (PLD_STEP_BINS - 2))
        if disc > self.coarsest():
            raise self.too_far(
                "noise_multiplier",
                f"the PLD of one step at σ = {setting.noise_multiplier:g}, q ="
                f" {setting.sampling_rate:g} would need an interval of {disc:.3g} to fit"
                f" PLD_STEP_BINS = {PLD_STEP_BINS} bins (limit PLD_DISC_MAX = {self.coarsest():g}):"
                f" σ this small is beyond what pld resolves; {self.elsewhere(setting)}",
            )
        return disc

    def sigma_floor(self, setting: Setting) -> float:
        """Poisson: the smallest σ whose one-step PLD fits :data:`PLD_STEP_BINS` at an interval of
        at most :data:`PLD_DISC_MAX` (the width falls with σ; bisection in log σ to 1e-6)."""
        floor = super().sigma_floor(setting)
        widest = self.coarsest() * (PLD_STEP_BINS - 2)
        if (
            self.one_gaussian(setting)
            or self.step_width(setting.replace(noise_multiplier=floor)) <= widest
        ):
            return floor
        lo, hi = math.log(floor), math.log(SIGMA_MAX)
        lo, hi = bisect(
            lambda x: self.step_width(setting.replace(noise_multiplier=math.exp(x))) > widest,
            lo,
            hi,
            steps=100,
            done=lambda lo, hi: hi - lo <= 1e-6,
        )
        return math.exp(hi)

    def one_step(self, setting: Setting, disc: float | None = None):
        """dp_accounting's discretized PLD of one Poisson step (a full-batch step: q = 1) at
        interval ``disc``, by default :meth:`discretization` (its ``from_gaussian_mechanism``, bit
        for bit, with the inverse privacy loss on arrays: :mod:`dplab.accounting.pld_gaussian`).
        Kept for the job (:mod:`dplab.accounting.memo`): the rows of a run in phases' ε curve, its
        calibration and its risk ask for the same steps' PLDs again."""
        from dplab.accounting.pld_gaussian import gaussian_pld

        relation = self.step(setting)[1]
        disc = self.discretization(setting) if disc is None else disc
        args = (setting.noise_multiplier, disc, setting.sampling_rate, relation)
        return memo.answer(("pld_one_step", *args), lambda: gaussian_pld(*args))

    def composed(self, setting: Setting, steps: np.ndarray, disc: float | None = None):
        """(the ε guesses, :class:`pld_tilted.TiltedPmf`) of each PMF of the one-step pair at
        interval ``disc`` (by default :meth:`discretization`): a guess is dp_accounting's FFT
        read-off (:class:`pld_curve.ComposedPmf`) where its window over max(steps) fits
        :data:`PLD_BINS`, else :class:`GaussianGuess`; either is only where the certified read-off
        tilts, not a value reported."""
        dense = _dense(self.one_step(setting, disc))
        t = int(np.max(steps))
        guesses = []
        for d in dense:
            c = pld_curve.ComposedPmf(d)
            lo, hi = pld_curve._chernoff_window(len(c.probs), t, c.log_mgfs, c.orders)  # noqa: SLF001
            guesses.append(c if hi - lo + 1 <= PLD_BINS else GaussianGuess(c))
        return guesses, [_tilted(d) for d in dense]

    def elsewhere(self, setting: Setting, query: tuple[str, float] | None = None) -> str:
        """Where to turn when pld cannot answer ``setting``: rdp where its assumptions hold, with
        its answer to ``query`` (("epsilon", δ) or ("delta", ε)) when given, or that no accountant
        here covers it (Poisson sampling with replace_one: only pld)."""
        rdp = RdpAccountant()
        try:
            rdp.check(setting)
        except AssumptionError:
            return (
                f"no other accountant here covers {setting.sampling} sampling with"
                f" {setting.neighbouring} (rdp, moments and the compositions assume add_remove)"
            )
        if query is None:
            return "rdp gives an upper bound"
        kind, value = query
        try:
            answer = rdp.epsilon(setting, value) if kind == "epsilon" else rdp.delta(setting, value)
        except AssumptionError as err:
            return f"rdp refuses it too ({rdp._reason(err)})"  # noqa: SLF001 (the same family)
        return f"rdp gives {'ε' if kind == 'epsilon' else 'δ'} ≤ {answer:.6g}"

    def _too_wide(
        self, setting: Setting, t: int, err: pld_tilted.TooWide, query: tuple[str, float]
    ):
        """The refusal of a certified read-off whose window exceeds
        :data:`pld_tilted.WINDOW_MAX`."""
        setting = setting.replace(steps=t)
        return self.too_far(
            "steps",
            f"the certified read-off of T = {t} steps at σ = {setting.noise_multiplier:g}, "
            f"q = {setting.sampling_rate:g} needs a window of {err.bins:.3g} bins (limit "
            f"WINDOW_MAX = {pld_tilted.WINDOW_MAX}): beyond what pld resolves; "
            f"{self.elsewhere(setting, query)}",
        )

    def _epsilon_curve(self, setting, delta, steps):
        """full_batch: exact (class docstring).  Poisson: at each T, dp_accounting's ε read off its
        FFT composition (:class:`pld_curve.ComposedPmf`, equal to dp_accounting's values to ~1e-8
        relative) is only the tilt point of the certified read-off (:mod:`pld_tilted`), whose value
        is reported: the FFT's absolute rounding put dp_accounting's ε below the truth at small δ
        (σ = 2, q = 0.5, T = 1000, δ = 1e-12: 91.056 against a true ε ≥ 91.09).  Grids of ≤ 64
        steps are evaluated at every step; on longer grids an upper bound within
        :data:`pld_curve.EXCESS` (1%) of the certified value at every T
        (:func:`pld_curve.monotone_curve`); at a second interval where the first fails
        (:meth:`_intervals`)."""
        if self.one_gaussian(setting):
            return gaussian_epsilon(delta, self.full_batch_mu(setting, steps))

        def curve(disc):
            composed, tilted = self.composed(setting, steps, disc)

            def certified(ts):
                """The pair's ε: the first PMF's (remove, usually the larger); the other's only at
                the T where its certified δ at that ε exceeds δ (elsewhere it is certified to be no
                larger)."""
                eps = np.array(
                    [
                        tilted[0].epsilon(int(t), delta, g)
                        for t, g in zip(ts, composed[0].epsilons(ts, delta))
                    ]
                )
                for c, p in zip(composed[1:], tilted[1:]):
                    over = np.flatnonzero(
                        [math.isfinite(e) and p.delta(int(t), e) > delta for t, e in zip(ts, eps)]
                    )
                    guesses = c.epsilons(ts[over], delta, floor=eps[over])
                    for j, g in zip(over, guesses):
                        eps[j] = max(eps[j], p.epsilon(int(ts[j]), delta, g))
                return eps

            return pld_curve.monotone_curve(certified, steps)

        try:
            return self._intervals(self.discretization(setting), curve)
        except pld_tilted.TooWide as err:
            raise self._too_wide(setting, int(np.max(steps)), err, ("epsilon", delta)) from None

    def _delta_curve(self, setting, epsilon, steps):
        """full_batch: exact.  Poisson: the certified δ(ε) of :mod:`pld_tilted` at each T
        (max over the pair; at a second interval where the first fails: :meth:`_intervals`)."""
        if self.one_gaussian(setting):
            return gaussian_delta(epsilon, self.full_batch_mu(setting, steps))

        def curve(disc):
            _, tilted = self.composed(setting, steps, disc)
            return np.array([max(p.delta(int(t), epsilon) for p in tilted) for t in steps])

        try:
            return self._intervals(self.discretization(setting), curve)
        except pld_tilted.TooWide as err:
            raise self._too_wide(setting, int(np.max(steps)), err, ("delta", epsilon)) from None

    def _intervals(self, disc: float, curve):
        """``curve(disc)`` (ε or δ: at each T, or of phases); where ``disc`` was refined below
        :attr:`value_discretization_interval` and gives no finite value or too wide a read-off
        window, also ``curve`` at that interval (any interval's value is an upper bound), keeping
        the smaller; the first :class:`pld_tilted.TooWide` where neither answers.  The refinement
        fits one step's loss std, but where δ lies in the sampled steps' far tail the window at the
        fine interval spans millions of bins: σ = 0.9, q = 1e-5, T = 1e5, δ = 1e-12 at 3.9e-6 gave
        no finite ε; at 1e-4 it reads 0.0579 (rdp: 1.398; the exact δ of a test on the outputs'
        sum puts the true ε above 0.021; dp_accounting's own read-off of the same PMF, 0.662, sits
        on its FFT's rounding floor: its δ falls only from 1.48e-12 at ε = 0.0579 to 1.25e-12 at
        0.3)."""
        coarse = self.value_discretization_interval
        try:
            values = curve(disc)
            if disc >= coarse or np.all(np.isfinite(values)):
                return values
        except pld_tilted.TooWide as err:
            if disc >= coarse:
                raise
            values, refused = None, err
        try:
            again = curve(coarse)
        except pld_tilted.TooWide:
            if values is None:
                raise refused from None
            return values
        return again if values is None else np.minimum(values, again)

    def _sigma_start(self, setting: Setting, epsilon: float, delta: float) -> float:
        """Every step seeing every record (:meth:`one_gaussian`: full_batch, Poisson at q = 1): the
        answer itself (σ_eff = √T·σ₁, σ₁ the exact one-release calibration).  Other Poisson: rdp's
        σ (rdp ≥ pld, so it meets the target up to pld's discretization): a bracket that never
        asks for the huge PLDs of tiny σ.  Refused at once where rdp's σ lies below
        :meth:`sigma_floor`: any σ pld could return is larger than this valid upper bound's, and the
        search would only find, one ~5 s PLD at a time, that the σ reaching the target lies among
        those pld does not resolve (σ = 0.1006 < 0.1255 at q = 0.01, T = 100,
        ε = 1000: 114 s before)."""
        if self.one_gaussian(setting):
            one = math.sqrt(setting.steps) * sigma_analytic(epsilon, delta)
            return one * units.sum_sensitivity(1.0, setting.neighbouring)
        if setting.neighbouring == Neighbouring.REPLACE_ONE:
            return 1.0  # no rdp for this pair
        with bracket_only():
            sigma = RdpAccountant().sigma(setting, epsilon, delta)
        floor = self.sigma_floor(setting)
        if sigma < floor:
            raise self.too_far(
                "epsilon",
                f"rdp already reaches ε = {epsilon:g} at δ = {delta:g} with σ = {sigma:.6g}, "
                f"below σ = {floor:.6g}, the smallest σ pld resolves here: pld's σ would "
                f"lie below what it resolves or above rdp's; rdp's σ is an upper bound",
            )
        return sigma
