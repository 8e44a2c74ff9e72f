"""Attack risk beside ε: the membership attacker's TPR at fixed FPR, and its advantage.

A mechanism is f-DP (Dong, Roth & Su, "Gaussian Differential Privacy", 2022, Def. 2.3) when no
test between the outputs on two neighbouring datasets has false-negative rate below f(α) at
false-positive rate α: an attacker's TPR at FPR α is at most 1 − f(α), and its advantage
TPR − FPR at most the total variation, which is δ(0) of the privacy profile (ibid. Prop. 2.12).

- full batch (and Poisson at q = 1, the same mechanism): T Gaussian steps are one Gaussian
  mechanism of μ = √T/σ_eff (ibid. Cor. 3.3), whose trade-off curve is closed form,
  G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (ibid. eq. (5)): TPR = Φ(Φ⁻¹(α) + μ) and advantage = 2Φ(μ/2) − 1.
- Poisson: from the privacy profile δ(ε) of dp_accounting's pessimistic PLD of the T-fold sampled
  Gaussian (the ``pld`` accountant's; an upper bound on the true δ(ε) at every ε ≥ 0, the larger of
  the remove and add directions).  An (ε, δ)-DP mechanism has TPR ≤ e^ε·α + δ and
  TPR ≤ 1 − e^{−ε}(1 − δ − α) at FPR α (Kairouz, Oh & Viswanath 2015, Thm 2.1); the minimum of
  these over a grid of ε is an upper bound on any attacker's TPR, in either direction, and tends
  to the symmetrised trade-off curve as the grid refines (Dong, Roth & Su 2022, Prop. 2.12).  It
  equals riskcal's reading of the same PLD (Kulynych et al., "Attack-Aware Noise Calibration for
  Differential Privacy", NeurIPS 2024, Algorithm 1) to ~1e-6, from above: riskcal's Algorithm 1 on
  the discretized PLD can fall ~1e-6 below the exact curve (tests/test_risk.py shows it at q = 1).

A run in phases (T₁ steps of one setting, then T₂ of another, …: :func:`phases_risk`) is read
the same way from its composition: full-batch phases (q = 1) are one Gaussian mechanism of
μ = √(Σᵢ μᵢ²) (Dong, Roth & Su 2022, Cor. 3.3), other phases the composition of the phases'
pessimistic PLDs (the ``pld`` accountant's, at one shared interval).

The neighbouring relation is the setting's (add/remove: one record in or out; replace_one: one
record swapped).  Other samplings, and accountants without a privacy-loss distribution, get no
risk: :func:`unavailable` names the reason.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr, ndtri

from dplab import units
from dplab.accounting import memo
from dplab.accounting.base import SIGMA_MAX, SIGMA_MIN
from dplab.accounting.pld_accountant import PldAccountant
from dplab.accounting.roots import bisect, bracket, expand
from dplab.accounting.setting import Setting
from dplab.errors import DPLabError
from dplab.schemes import Sampling

if TYPE_CHECKING:
    from dp_accounting.pld import privacy_loss_distribution

#: the false-positive rates at which every risk reading gives the attacker's TPR
FPRS = (0.001, 0.01, 0.1)
#: the accountants whose ε comes from the privacy-loss distribution the risk is read from
PLD_ACCOUNTANTS = ("pld",)
#: the samplings the risk is computed for
RISK_SAMPLINGS = (Sampling.POISSON, Sampling.FULL_BATCH)


def gaussian_tpr(fpr, mu):
    """TPR = 1 − G_μ(α) = Φ(Φ⁻¹(α) + μ): the most powerful test between N(0,1) and N(μ,1) at FPR α
    (Dong, Roth & Su 2022, eq. (5))."""
    return ndtr(ndtri(np.asarray(fpr, float)) + mu)


def gaussian_advantage(mu):
    """max_α TPR − α of μ-GDP = total variation between N(0,1) and N(μ,1) = 2Φ(μ/2) − 1."""
    return 2 * ndtr(np.asarray(mu, float) / 2) - 1


def unavailable(accountant: str, setting: Setting) -> str | None:
    """Why no risk is given for ``accountant`` on ``setting``; None when it is."""
    if accountant not in PLD_ACCOUNTANTS:
        return (
            f"{accountant} has no privacy-loss distribution to read an attack's TPR from "
            f"(risk comes from: {', '.join(PLD_ACCOUNTANTS)})"
        )
    if setting.sampling not in RISK_SAMPLINGS:
        return (
            f"no privacy-loss distribution for {setting.sampling} sampling (risk for:"
            f" {', '.join(RISK_SAMPLINGS)})"
        )
    return None


#: points of the coarse ε grid of :func:`profile_tpr`, and of the fine one around each minimum
PROFILE_POINTS, FINE_POINTS = 129, 2049


def _tpr_bounds(epsilons: np.ndarray, deltas: np.ndarray, fprs: np.ndarray) -> np.ndarray:
    """TPR bounds at each FPR (rows) from each (ε, δ) pair (columns): min(e^ε α + δ,
    1 − e^{−ε}(1 − δ − α))."""
    a = fprs[:, None]
    return np.minimum(np.exp(epsilons) * a + deltas, 1 - np.exp(-epsilons) * (1 - deltas - a))


def privacy_profile(pld: privacy_loss_distribution.PrivacyLossDistribution):
    """δ(ε) of ``pld``, vectorized over ε ≥ 0, the larger of its two directions: for each dense PMF,
    δ(ε) = p(∞) + Σ_{ℓ>ε} p(ℓ) − e^ε Σ_{ℓ>ε} p(ℓ)e^{−ℓ} from tail sums (the sum of ``_delta_at``
    in :mod:`dplab.accounting.pld_curve`, for many ε at once)."""
    tails = []
    for pmf in (pld._pmf_remove, pld._pmf_add):  # noqa: SLF001 (tests/test_dependencies.py)
        dense = pmf.to_dense_pmf()
        losses = (dense._lower_loss + np.arange(len(dense._probs))) * dense._discretization  # noqa: SLF001
        keep = losses > 0
        losses, probs = losses[keep], dense._probs[keep]  # noqa: SLF001
        mass = np.append(np.cumsum(probs[::-1])[::-1], 0.0)
        weighted = np.append(np.cumsum((probs * np.exp(-losses))[::-1])[::-1], 0.0)
        tails.append((losses, mass, weighted, dense._infinity_mass))  # noqa: SLF001

    def delta_of(epsilons):
        epsilons = np.asarray(epsilons, float)
        out = np.zeros(epsilons.shape)
        for losses, mass, weighted, infinity in tails:
            first = np.searchsorted(losses, epsilons, side="right")  # the first loss > ε
            out = np.maximum(out, infinity + mass[first] - np.exp(epsilons) * weighted[first])
        return np.clip(out, 0.0, 1.0)

    return delta_of


def profile_tpr(delta_of, fprs: np.ndarray, epsilon_max: float = 50.0) -> np.ndarray:
    """Upper bound on the TPR at each FPR of a mechanism with privacy profile ``delta_of`` (an upper
    bound on δ(ε), vectorized, ε ≥ 0): the minimum of :func:`_tpr_bounds` over
    :data:`PROFILE_POINTS` ε in [0, ``epsilon_max``], refined with :data:`FINE_POINTS` around each
    minimum.  Any grid gives a valid bound; refining only lowers it towards the trade-off curve."""
    coarse = np.linspace(0.0, epsilon_max, PROFILE_POINTS)
    bounds = _tpr_bounds(coarse, delta_of(coarse), fprs)
    best = bounds.min(axis=1)
    step = coarse[1] - coarse[0]
    for i, k in enumerate(bounds.argmin(axis=1)):
        fine = np.linspace(max(coarse[k] - step, 0.0), coarse[k] + step, FINE_POINTS)
        best[i] = min(best[i], _tpr_bounds(fine, delta_of(fine), fprs[i : i + 1]).min())
    return best


def composed_pld(settings: list[Setting]) -> privacy_loss_distribution.PrivacyLossDistribution:
    """The ``pld`` accountant's pessimistic PLD of T₁ steps of ``settings[0]``, then T₂ of
    ``settings[1]``, …: each one-step PLD at the phases' one interval
    (:meth:`PldAccountant.shared_discretization`), composed Tᵢ times, then with the others by
    dp_accounting (its limits apply)."""
    accountant = PldAccountant()
    for setting in settings:
        accountant.check(setting)
    disc = accountant.shared_discretization(settings)
    composed = None
    for setting in settings:
        part = accountant.one_step(setting, disc).self_compose(int(setting.steps))
        composed = part if composed is None else composed.compose(part)
    return composed


def risk(setting: Setting, fprs=FPRS) -> dict:
    """{"tpr": [TPR at each FPR in ``fprs``], "fpr": fprs, "advantage": …, "neighbouring": …,
    "method": …} of the T-step mechanism of ``setting`` (module docstring)."""
    if setting.sampling not in RISK_SAMPLINGS:
        raise DPLabError("sampling", unavailable("pld", setting))
    fprs = np.asarray(fprs, float)
    return memo.answer(("risk", repr(setting), fprs.tobytes()), lambda: _risk(setting, fprs))


def _risk(setting: Setting, fprs: np.ndarray) -> dict:
    """:func:`risk` of a setting it accepts, at the FPRs ``fprs``."""
    if PldAccountant.one_gaussian(setting):
        PldAccountant().check(setting)
        mu = float(PldAccountant.full_batch_mu(setting, setting.steps))
        return _gaussian_reading(mu, fprs, setting.neighbouring, "μ = √T/σ_eff")
    return _profile_reading(composed_pld([setting]), fprs, setting.neighbouring)


def phases_risk(settings: list[Setting], fprs=FPRS) -> dict:
    """:func:`risk` of a run in phases: T₁ steps of ``settings[0]``, then T₂ of ``settings[1]``, …
    (one neighbouring relation; module docstring).  Phases that each see every record (full batch,
    or Poisson at q = 1: :meth:`PldAccountant.one_gaussian`) compose to one Gaussian
    mechanism of μ = √(Σᵢ μᵢ²), each μᵢ = √Tᵢ/σᵢ_eff (Dong, Roth & Su 2022, Cor. 3.3): closed form.
    Other phases (a full-batch one among them: q = 1): the ``pld`` accountant's pessimistic
    one-step PLDs at the phases' one interval (:meth:`PldAccountant.shared_discretization`),
    each composed Tᵢ times and then with the others by dp_accounting, read as one setting's."""
    if len(settings) == 1:
        return risk(settings[0], fprs)
    for i, setting in enumerate(settings):
        if setting.sampling not in RISK_SAMPLINGS:
            raise DPLabError(f"phases[{i}].sampling", unavailable("pld", setting))
    fprs = np.asarray(fprs, float)
    key = ("phases_risk", tuple(repr(s) for s in settings), fprs.tobytes())
    return memo.answer(key, lambda: _phases_risk(settings, fprs))


def _phases_risk(settings: list[Setting], fprs: np.ndarray) -> dict:
    """:func:`phases_risk` of phases it accepts, at the FPRs ``fprs``."""
    if all(PldAccountant.one_gaussian(s) for s in settings):
        accountant = PldAccountant()
        for setting in settings:
            accountant.check(setting)
        mu = accountant.full_batch_phases_mu(settings)
        return _gaussian_reading(mu, fprs, settings[0].neighbouring, "μ = √(Σᵢ Tᵢ/σᵢ_eff²)")
    return _profile_reading(composed_pld(settings), fprs, settings[0].neighbouring)


def _gaussian_reading(mu: float, fprs: np.ndarray, neighbouring: str, formula: str) -> dict:
    """The reading of one Gaussian mechanism of ``mu``: its trade-off curve, closed form."""
    return _reading(
        gaussian_tpr(fprs, mu),
        float(gaussian_advantage(mu)),
        fprs,
        neighbouring,
        f"closed form: μ-GDP with {formula} = {mu:.6g} (Dong, Roth & Su 2022)",
    )


def _profile_reading(pld, fprs: np.ndarray, neighbouring: str) -> dict:
    """The reading of a pessimistic PLD's privacy profile, both directions."""
    delta_of = privacy_profile(pld)
    return _reading(
        profile_tpr(delta_of, fprs),
        float(delta_of(0.0)),  # numpy's sums: the same bits whatever BLAS's threads
        fprs,
        neighbouring,
        "privacy profile of dp_accounting's pessimistic PLD (pld accountant), both directions",
    )


def _reading(tpr, advantage: float, fprs: np.ndarray, neighbouring: str, method: str) -> dict:
    """The dict of :func:`risk`; no TPR below the FPR (no test does worse than guessing)."""
    tpr = np.clip(np.maximum(tpr, fprs), 0.0, 1.0)
    return {
        "fpr": [float(a) for a in fprs],
        "tpr": [float(t) for t in tpr],
        "advantage": min(max(advantage, 0.0), 1.0),
        "neighbouring": neighbouring,
        "method": method,
    }


#: the risk columns of a tidy table (sweeps, figure tables): the TPR at each FPR of :data:`FPRS`,
#: the advantage, and ``risk_note`` (the method, or why a row has no risk)
COLUMNS = [*(f"tpr_at_fpr_{a:g}" for a in FPRS), "advantage", "risk_note"]


def columns(accountant: str, setting: Setting | None) -> dict:
    """The :data:`COLUMNS` of one table row: the risk of ``setting``'s T steps where ``accountant``
    has a privacy-loss distribution (:func:`risk`), else empty values and the reason."""
    why = unavailable(accountant, setting) if setting is not None else "no setting (non-private)"
    if why is None:
        try:
            reading = risk(setting)
        except DPLabError as err:
            why = str(err)
        else:
            return {
                **{c: t for c, t in zip(COLUMNS, reading["tpr"])},
                "advantage": reading["advantage"],
                "risk_note": f"{reading['neighbouring']}; {reading['method']}",
            }
    return {**{c: float("nan") for c in COLUMNS[:-1]}, "risk_note": f"no risk: {why}"}


def check_target(tpr: float | None, fpr: float | None, advantage: float | None) -> None:
    """A risk target: either (tpr, fpr) with 0 < fpr < tpr < 1, or an advantage in (0, 1)."""
    if advantage is not None:
        if tpr is not None or fpr is not None:
            raise DPLabError("advantage", "give either --advantage or --tpr with --fpr, not both")
        if not 0 < advantage < 1:
            raise DPLabError("advantage", f"must lie in (0, 1), got {advantage}")
        return
    if tpr is None or fpr is None:
        raise DPLabError("tpr" if tpr is None else "fpr", "--tpr and --fpr go together")
    for key, value in (("fpr", fpr), ("tpr", tpr)):
        if not 0 < value < 1:
            raise DPLabError(key, f"must lie in (0, 1), got {value}")
    if not tpr > fpr:
        raise DPLabError(
            "tpr",
            f"must exceed fpr ({fpr}): a TPR at most the FPR is met by guessing, by any σ; got"
            f" {tpr}",
        )


def level(setting: Setting, fpr: float | None, advantage: float | None) -> float:
    """What a risk target bounds, for the T-step mechanism of ``setting``: its advantage (with
    ``advantage``), else its TPR at FPR ``fpr``."""
    if advantage is not None:
        return advantage_of(setting)
    return risk(setting, fprs=(fpr,))["tpr"][0]


def advantage_of(setting: Setting) -> float:
    """The advantage alone of :func:`risk` (one δ(0), no trade-off curve)."""
    if not PldAccountant.one_gaussian(setting):
        return min(max(float(composed_pld([setting]).get_delta_for_epsilon(0.0)), 0.0), 1.0)
    return risk(setting, fprs=(0.5,))["advantage"]


def check_reachable(setting: Setting, target: float, fpr, advantage) -> None:
    """Refuse a Poisson risk target that every σ meets: as σ → 0 a step that samples the record
    reveals it, so no attacker does better than detecting that it was ever sampled, with
    probability p = 1 − (1 − q)^T: TPR ≤ α + (1 − α)·p at FPR α, advantage ≤ p (either relation:
    the differing record is sampled with probability q per step), with equality only at σ = 0."""
    sampled = -math.expm1(setting.steps * math.log1p(-setting.sampling_rate))
    ceiling = sampled if advantage is not None else fpr + (1 - fpr) * sampled
    if target >= ceiling:
        what = "advantage" if advantage is not None else f"TPR at FPR {fpr:g}"
        raise DPLabError(
            "advantage" if advantage is not None else "tpr",
            f"every σ > 0 meets it: at q = {setting.sampling_rate:g}, T = {setting.steps} the"
            f" record is in some batch with probability 1 − (1 − q)^T = {sampled:.4g}, and no"
            f" attacker's {what} exceeds {ceiling:.4g} even without noise (a target below it is"
            " calibrated)",
        )


def sigma_for_risk(
    setting: Setting,
    tpr: float | None = None,
    fpr: float | None = None,
    advantage: float | None = None,
    rtol: float = 1e-3,
) -> float:
    """The smallest σ keeping every attacker within the target (TPR ≤ ``tpr`` at FPR ``fpr``, or
    advantage ≤ ``advantage``) over T steps of ``setting``: the calibration of riskcal (Kulynych
    et al. 2024, §4) on the reading of :func:`risk`.  Full batch (q = 1): closed form,
    μ = Φ⁻¹(tpr) − Φ⁻¹(fpr) or μ = 2Φ⁻¹((1 + a)/2), σ_eff = √T/μ.  Poisson: bisection in log σ
    to ``rtol``, returning the end that meets the target."""
    check_target(tpr, fpr, advantage)
    accountant = PldAccountant()

    target, levels = (advantage if advantage is not None else tpr), {}

    def ok(sigma: float) -> bool:
        sigma = min(sigma, SIGMA_MAX)  # exp(log(SIGMA_MAX)) rounds above it
        if sigma not in levels:
            levels[sigma] = level(setting.replace(noise_multiplier=sigma), fpr, advantage)
        return levels[sigma] <= target

    if accountant.one_gaussian(setting):
        mu = 2 * ndtri((1 + advantage) / 2) if advantage is not None else ndtri(tpr) - ndtri(fpr)
        sigma = (
            math.sqrt(setting.steps) / float(mu) * units.sum_sensitivity(1.0, setting.neighbouring)
        )
        if not SIGMA_MIN <= sigma <= SIGMA_MAX:
            raise DPLabError(
                "noise_multiplier",
                f"the σ meeting the risk target is {sigma:.6g}, outside the range "
                f"[{SIGMA_MIN:g}, {SIGMA_MAX:g}] σ is calibrated in",
            )
        return expand(
            lambda s: not ok(s), sigma, lambda s: s * (1 + 1e-12)
        )  # rounding: the side meeting it
    if setting.sampling not in RISK_SAMPLINGS:
        raise DPLabError("sampling", unavailable("pld", setting))
    check_reachable(setting, target, fpr, advantage)

    floor = accountant.sigma_floor(setting.replace(noise_multiplier=1.0))
    lo, hi = bracket(
        lambda x: ok(math.exp(x)), 0.0, math.log(floor), math.log(SIGMA_MAX), width=0.5
    )
    if lo is None:  # the smallest σ meeting the target lies below what pld resolves: not this floor
        reached = max(levels.values())  # at the floor: the level falls as σ grows
        raise DPLabError(
            "advantage" if advantage is not None else "tpr",
            f"σ = {floor:.6g}, the smallest σ pld resolves here, already meets the target (its"
            f" {'advantage' if advantage is not None else 'TPR'} is {reached:.4g}): the smallest σ"
            f" meeting it lies below, beyond what pld resolves (a target below {reached:.4g} is"
            " calibrated)",
        )
    if hi is None:
        raise DPLabError(
            "noise_multiplier", f"no σ ≤ {SIGMA_MAX:g} meets the risk target for this setting"
        )
    lo, hi = bisect(
        lambda x: not ok(math.exp(x)), lo, hi, steps=200, done=lambda lo, hi: hi - lo <= rtol
    )
    return math.exp(float(hi))
