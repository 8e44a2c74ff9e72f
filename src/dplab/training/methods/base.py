"""What a training method plugs into the one loop of :mod:`dplab.training.loop`.

A method is a :class:`Method` (a frozen dataclass): its **sampler** (:meth:`Method.sampler`, from
the samplings it allows), its **noise** (none, i.i.d. Gaussian or correlated), its **update**
(how the clipped sum is normalised, whether λ shrinks the weights: 001 eq. 12, 17), its
**projection** (none, optional or required: 001 eq. 1), the run keys only it reads, and which
accountants may account for it: those :func:`dplab.accounting.eligibility.exclusion` admits for its
:class:`~dplab.accounting.eligibility.Update` and Setting, or the fixed list it names (dp_mf:
``mf``).
The base class is the independent-noise engine (σ from :func:`dplab.training.privacy.plan`); a
method with another mechanism (dp_mf) overrides :meth:`Method.resolve`, :meth:`Method.sampler`,
:meth:`Method.mechanism` and :meth:`Method.factorization`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dplab.accounting.eligibility import Update
from dplab.training import privacy, samplers
from dplab.training.noise import GaussianNoise, NoiseSource, NoNoise
from dplab.training.samplers import Sampler
from dplab.training.settings import RunSettings


@dataclass(kw_only=True)
class Mechanism:
    """What a run's method fixes before its first step: the batch sampler, the privacy claim
    (σ and ε, :class:`~dplab.training.privacy.Plan`) and the noise source."""

    sampler: Sampler
    plan: privacy.Plan
    noise: NoiseSource


@dataclass(frozen=True)
class Method:
    """One training method: its declared parts (fields) and the engine's
    default plug-ins (methods)."""

    name: str
    display: str  # the name figures and tables show (docs/training.md)
    source: str  # the algorithm in the source papers (docs/references.md)
    rule: str  # the update, in the notation of :mod:`dplab.training.loop` (g = Σ clip(∇ℓ_i) over B)
    samplings: tuple[str, ...]  # allowed; the first one is the default
    noise: str = "independent"  # "none", "independent" (N(0, σ²C²) per step) or "correlated"
    normalize: str = "expected"  # default: "expected" (÷ b) or "realized" (÷ |B|, 001 eq. 12)
    projection: str = "none"  # "none", "optional" or "required" (ball of diameter D)
    regularized: bool = False  # uses `regularization` (001 eq. 17)
    accountant: str | None = "rdp"  # default accountant for calibrating σ from target_epsilon
    accountants: tuple[str, ...] | None = (
        None  # the only accountants that may account for it (None: claims decide)
    )
    keys: tuple[str, ...] = ()  # run keys that only this method reads

    @property
    def private(self) -> bool:
        return self.noise != "none"

    def default_accountant(self, sampling: str, neighbouring: str) -> str | None:
        """The accountant that calibrates σ when the run names none: the method's, except where
        its assumptions do not hold for the run's sampling and neighbouring relation (None
        for a non-private method)."""
        natural = self.accountant
        if natural is None:
            return None
        if natural == "rdp" and neighbouring == "replace_one":
            natural = "pld"  # dp_accounting's RDP of the sampled Gaussian is add/remove only
        if sampling == "balls_in_bins":  # its amplification is proved for add_remove only
            natural = "balls_in_bins" if neighbouring == "add_remove" else "fixed_batches"
        if sampling == "shuffle" and natural != "pabi":  # no amplification by shuffling is proved
            natural = "fixed_batches"
        return natural

    def update(self, run: RunSettings) -> Update:
        """The engine's update for a resolved run: the method's noise, how the run normalizes
        the clipped sum and its optimizer (what :func:`dplab.accounting.eligibility.refusal`
        reads)."""
        return Update(noise=self.noise, normalize=run.normalize, optimizer=run.optimizer.label)

    def options(self, run: RunSettings):
        """The method's own keys (:attr:`keys`) of ``run``, as the options type the method owns
        (dp_mf: :class:`~dplab.training.methods.dp_mf.MFOptions`); None for a method with none."""
        return None

    def resolve(self, run: RunSettings, err) -> dict:
        """Cross-key rules of the method's own keys (``err(key, message)`` builds the error);
        called last by :func:`dplab.training.resolve.resolve_run`, which fills in the run the
        defaults it returns (key -> value)."""
        return {}

    def sampler(self, run: RunSettings, n: int) -> Sampler:
        """The batch sampler of a resolved run on ``n`` examples
        (:func:`dplab.training.samplers.build`)."""
        return samplers.build(run.sampling, n, run.b(n), run.reshuffle)

    def mechanism(
        self,
        run: RunSettings,
        n: int,
        dimension: int,
        info: dict,
        grid: list[int],
        features,
        factorization=None,
    ) -> Mechanism:
        """Sampler, claim and noise of a run, decided before training: σ and ε from
        :func:`dplab.training.privacy.plan` (``features``: the records the run trains on), i.i.d.
        N(0, σ²C²) on the clipped sum (none for a non-private method)."""
        sampler = self.sampler(run, n)
        claim = privacy.plan(run, self.update(run), n, run.b(n), dimension, info, grid, features)
        asked = privacy.requested_accountants(run)  # `accountants: []`: the run asks for no ε
        if (
            self.private and claim.setting is not None and asked and not claim.curves
        ):  # no run without an ε
            raise privacy.unclaimed(claim.setting, claim.update, claim.excluded)
        noise = GaussianNoise(claim.noise_multiplier * run.clip) if self.private else NoNoise()
        return Mechanism(sampler=sampler, plan=claim, noise=noise)

    def factorization(self, entry: dict) -> tuple[str, dict] | None:
        """(cache key, spec) of the factorization a run entry trains with
        (:func:`dplab.layout.mf_spec`); None for a method without one.  ``entry`` is the run as
        the config writes it, not yet resolved: the jobs and figures plan factorizations from it."""
        return None

    def load_factorization(self, run: RunSettings, cache: str | Path):
        """The run's saved factorization from the folder ``cache`` (None without one)."""
        return None
