"""dplab: reproducible privacy analysis of DP-SGD (training, accountants, figures)."""

from dplab import dp_accounting_parts

__version__ = "0.1.0"

dp_accounting_parts.install()  # dp_accounting imported by the parts a job uses
