"""The Poisson-sampled Gaussian's RDP of :mod:`dplab.accounting.sampled_gaussian_rdp` is
dp_accounting's ``RdpAccountant``'s, bit for bit, at every default order: where its series
converge, where they do not (+∞, and the count of those orders), and at the edges q ∈ {0, 1}
and σ = 0; and the ``rdp`` accountant's ε and σ are unchanged by it."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from dplab.accounting.dp_accounting_adapters import RdpAccountant
from dplab.accounting.sampled_gaussian_rdp import poisson_gaussian_rdp
from dplab.accounting.setting import Setting

ORDERS = rdp_privacy_accountant.DEFAULT_RDP_ORDERS


def reference(q: float, sigma: float) -> tuple[np.ndarray, int]:
    """dp_accounting's one-step RDP, and how many orders' series did not converge (its +∞ where
    0 < q < 1 and σ > 0; it logs a warning for each)."""
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
    rdp = np.asarray(acc._rdp, dtype=float)  # noqa: SLF001
    return rdp, int(np.isinf(rdp).sum()) if 0 < q < 1 and sigma > 0 else 0


@pytest.mark.parametrize(
    ("q", "sigma"),
    [
        (0.05, 0.9),  # the default DAG's rdp calibration, near its root
        (0.05, 0.657047),  # four fractional orders do not converge
        (0.004, 1.1),
        (0.3, 3.7),
        (0.9, 0.5),
        (1e-4, 20.0),
        (0.0, 1.0),
        (1.0, 1.3),
        (0.2, 0.0),
    ],
)
def test_one_step_rdp_is_dp_accountings_bit_for_bit(q, sigma):
    ours, unconverged = poisson_gaussian_rdp(q, sigma, ORDERS)
    theirs, diverged = reference(q, sigma)
    assert ours.tobytes() == theirs.tobytes(), np.flatnonzero(ours != theirs)
    assert unconverged == diverged


def test_some_orders_do_not_converge_and_are_reported():
    """The grid above reaches the non-converging branch (else it would not test it)."""
    rdp, unconverged = poisson_gaussian_rdp(0.05, 0.657047, ORDERS)
    assert unconverged == np.isinf(rdp).sum() > 0


def test_rdp_epsilon_and_sigma_agree_with_dp_accountings_accountant():
    """ε of T Poisson steps, and σ calibrated back from it, through the adapter: dp_accounting's
    own ``get_epsilon`` on the same event (the adapter's safe replacements do not bind here)."""
    setting = Setting(noise_multiplier=1.1, sampling_rate=0.01, steps=1000)
    eps = RdpAccountant().epsilon(setting, 1e-5)
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 1000)
    assert eps == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12)
    assert RdpAccountant().sigma(setting, eps, 1e-5) == pytest.approx(1.1, rel=1e-4)


def test_a_calibration_notes_the_unconverged_orders_once(monkeypatch, caplog):
    """A σ search asks ε at many σ; the note named σ, so it was logged once per σ tried (9 lines
    for one `dplab sigma` at q = 0.6, T = 146)."""
    import logging

    from dplab.accounting import dp_accounting_adapters

    monkeypatch.setattr(dp_accounting_adapters, "_reported", set())
    setting = Setting(sampling_rate=0.6005593068047821, steps=146, sampling="poisson")
    with caplog.at_level(logging.INFO, logger="dplab"):
        sigma = RdpAccountant().sigma(setting, 145.0, 1.089e-4)
    notes = [r for r in caplog.records if "did not converge" in r.getMessage()]
    assert len(notes) == 1 and 0.7 < sigma < 0.75


def test_rdp_used_only_to_bracket_pld_s_sigma_logs_no_note(monkeypatch, caplog):
    """pld's σ search starts from rdp's σ; rdp's note on unconverged orders then described no
    value the user was given (a dp_mf run accounted by mf logged it). rdp's own search still
    notes it."""
    import logging

    from dplab.accounting import dp_accounting_adapters
    from dplab.accounting.pld_accountant import PldAccountant

    monkeypatch.setattr(dp_accounting_adapters, "_reported", set())
    setting = Setting(sampling_rate=0.078, steps=13)
    with caplog.at_level(logging.INFO, logger="dplab"):
        PldAccountant().sigma(setting, 1.0, 1e-6)
        assert not [r for r in caplog.records if "did not converge" in r.getMessage()]
        RdpAccountant().sigma(setting, 1.0, 1e-6)
    assert [r for r in caplog.records if "did not converge" in r.getMessage()]
