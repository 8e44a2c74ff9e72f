"""What a resolved run needs from its dataset, checked from the two config entries alone: no
data, no training.  :func:`dplab.config.check_config` runs it for every training job before
Snakemake plans one, so a mistake is refused at once rather than in a job after earlier jobs ran.

Every check is the engine's own code run on the sizes the dataset will have
(:func:`dplab.training.data.expected_info`): the method's sampler (batch_size ≤ n; dp_mf's
sampler spec), the model (a cnn needs images; no batch norm; one logit per class for one example:
:func:`dplab.training.models.parameters`, which imports torch for a model file only), add_remove
with an epoch sampler only where adding or removing a record keeps ⌊n/b⌋
(:func:`dplab.accounting.epochs.check`: no upper bound holds otherwise), and — for σ calibrated from
``target_epsilon`` — the calibrating accountant's assumptions on the run's Setting
(:func:`dplab.training.privacy.check_calibration`, what :func:`dplab.training.privacy.calibrate`
asks first); for a given σ, that one upper-bound accountant the run reports accepts it
(:func:`dplab.training.privacy.check_claimable`: σ = 1e-320 passed and trained with "epsilon:
none").  For a hidden-state accountant also whether any σ reaches the target: those bounds keep a
floor as σ grows (e.g. 001 Thm 3's), while a composition bound's ε goes to 0, so one evaluation at
the search's largest σ settles it.  The σ search itself is left to the job: it costs seconds per run
and Snakemake reads the config at every start (on a cluster, once per job).
"""

from __future__ import annotations

import numpy as np

from dplab import accounting
from dplab.accounting import epochs
from dplab.accounting.base import SIGMA_MAX
from dplab.errors import AssumptionError, DPLabError
from dplab.training import data, models, privacy
from dplab.training.methods import METHODS
from dplab.training.settings import RunSettings


def check_run(run: RunSettings, dataset: dict) -> None:
    """Raise :class:`DPLabError` (keyed by the run's own key) if the resolved run ``run``
    (:func:`dplab.training.resolve.resolve_run`, :meth:`RunSettings.of`) would fail on dataset
    entry ``dataset`` (resolved) before its first step."""
    info = data.expected_info(dataset)
    n = info["train_size"]
    # the model's shapes and one example's logits; torch only for a model file (the user's)
    dimension = models.parameters(run, info["input_shape"], info["classes"])
    method = METHODS[run.method]
    method.sampler(run, n)  # batch_size <= n; dp_mf's sampler spec
    update = method.update(run)
    if update.noise != "independent":
        return  # no σ to calibrate (sgd), or a mechanism that checks its own claim (dp_mf)
    b = run.b(n)
    constants, _ = privacy.loss_constants(
        run, info, np.zeros((0, 1))
    )  # the data hold no record beyond R
    setting = privacy.build_setting(run, n, b, dimension, 1.0, constants)
    epochs.check(run.accountant, setting)  # no upper bound holds where add_remove changes ⌊n/b⌋
    if (
        run.noise_multiplier is not None
    ):  # σ given: some upper bound must accept it (no run without an ε)
        privacy.check_claimable(
            run, setting.replace(noise_multiplier=float(run.noise_multiplier)), update
        )
    if run.target_epsilon is None and run.target_tpr is None:
        return
    privacy.check_calibration(run, setting, update)
    if run.target_epsilon is None:
        return  # a risk target: pld, whose calibration reaches any TPR above the FPR
    name = run.accountant
    accountant = accounting.get(name)
    if accountant.release == "last_iterate":
        try:
            floor = accountant.epsilon(setting.replace(noise_multiplier=SIGMA_MAX), run.delta)
            why = f"its smallest ε is {floor:.4g}"
        except AssumptionError as err:
            floor, why = np.inf, err.message
        if not floor <= run.target_epsilon:
            raise DPLabError(
                "target_epsilon",
                f"{name!r} reaches no ε <= {run.target_epsilon} for this run with "
                f"any σ <= {SIGMA_MAX:g} ({why}); raise target_epsilon or calibrate "
                "with another accountant",
            )
