"""A run's metrics.json: the few numbers researchers compare runs by (``dvc metrics show``)."""

from __future__ import annotations

from dplab.training.summary import RunSummary


def metrics(summary: RunSummary) -> dict:
    """From a run's summary.json: the final step's test accuracy, test loss and train loss, δ,
    and ε of every claimed accountant (upper bounds only) keyed by the accountant's name."""
    final = summary.final
    return {
        "test_accuracy": final.test_accuracy,
        "test_loss": final.test_loss,
        "train_loss": final.train_loss,
        "delta": summary.delta,
        "epsilon": dict(summary.epsilon),
    }
