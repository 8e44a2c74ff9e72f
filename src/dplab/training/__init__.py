"""Private training engine (docs/training.md): data, models, samplers, noise, the one
training loop, and the run's privacy claim.  Entry points: ``dplab prepare-data`` and
``dplab train`` (:mod:`dplab.commands.data`, :mod:`dplab.commands.train`)."""
