"""Answers kept for a job (dplab.accounting.memo): computed once, the same bits, only inside."""

from dplab import accounting
from dplab.accounting import risk
from dplab.accounting.memo import kept_answers
from dplab.accounting.setting import Setting

SETTING = Setting(noise_multiplier=1.1, sampling_rate=0.01, steps=100)


def test_kept_answers_are_computed_once_the_same_bits_and_only_inside(monkeypatch):
    rdp = accounting.get("rdp")
    alone = rdp.epsilon_curve(SETTING, 1e-5, [10, 100])
    sigma_alone = rdp.sigma(SETTING, 2.0, 1e-5)
    calls = []
    compute = type(rdp)._epsilon_curve
    monkeypatch.setattr(
        type(rdp), "_epsilon_curve", lambda self, *a: calls.append(a) or compute(self, *a)
    )
    with kept_answers():
        first = rdp.epsilon_curve(SETTING, 1e-5, [10, 100])
        first[:] = 0.0  # a caller's change does not reach what is kept
        again = rdp.epsilon_curve(SETTING, 1e-5, [10, 100])
        assert len(calls) == 1
        rdp.epsilon_curve(SETTING, 1e-6, [10, 100])  # another question: computed
        assert len(calls) == 2
        sigma = rdp.sigma(SETTING, 2.0, 1e-5)  # a root search: one ε per σ it tries
        searched = len(calls)
        assert rdp.sigma(SETTING, 2.0, 1e-5) == sigma == sigma_alone
        assert type(rdp)().sigma(SETTING, 2.0, 1e-5) == sigma  # a new instance: the same answers
        assert len(calls) == searched > 2  # the same search again: every ε was kept
    assert again.tobytes() == alone.tobytes()
    rdp.epsilon_curve(SETTING, 1e-5, [10, 100])
    assert len(calls) == searched + 1  # outside the block nothing is kept


def test_kept_risk_is_the_risk_computed_alone(monkeypatch):
    alone = risk.risk(SETTING)
    calls = []
    compute = risk._risk
    monkeypatch.setattr(risk, "_risk", lambda *a: calls.append(a) or compute(*a))
    with kept_answers():
        assert risk.risk(SETTING) == alone == risk.risk(SETTING)
    assert len(calls) == 1


def test_the_phases_epsilon_is_kept_for_the_job(monkeypatch):
    """A run in phases asks its composed ε in its calibration, its plan and the last row of its
    ε curve: inside the block it is computed once, the same bits as alone."""
    from dplab.accounting import phases

    run = [SETTING, SETTING.replace(noise_multiplier=2.0, steps=50)]
    alone = phases.epsilon("rdp", run, 1e-5)
    accountant = type(phases.get("rdp"))
    calls, compose = [], accountant.epsilon
    monkeypatch.setattr(
        accountant, "epsilon", lambda self, *a: calls.append(a) or compose(self, *a)
    )
    with kept_answers():
        assert phases.epsilon("rdp", run, 1e-5) == alone
        assert phases.epsilon_curve("rdp", run, 1e-5, [100, 150])[1] == alone
        assert len(calls) == 1  # the whole run once (step 100 is the first phase's own curve)
    phases.epsilon("rdp", run, 1e-5)
    assert len(calls) == 2  # outside the block nothing is kept
