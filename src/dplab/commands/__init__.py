"""One module per group of ``dplab`` subcommands (see :mod:`dplab.cli`)."""
