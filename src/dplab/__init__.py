"""dplab: reproducible privacy analysis of DP-SGD (training, accountants, figures)."""

from dplab import package_parts

__version__ = "0.2.0"

package_parts.install()  # dp_accounting and scipy.special imported by the parts a job uses
