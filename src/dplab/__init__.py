"""dplab: reproducible privacy analysis of DP-SGD (training, accountants, figures)."""

__version__ = "0.1.0"
