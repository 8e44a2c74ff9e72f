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
