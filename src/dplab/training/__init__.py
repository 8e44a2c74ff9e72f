"""Private training engine (CATALOGUE §3, issue 4): data, models, samplers, noise, the one
training loop, and the run's privacy claim.  Entry points: ``dplab prepare-data`` and
``dplab train`` (:mod:`dplab.commands.data`, :mod:`dplab.commands.train`)."""
