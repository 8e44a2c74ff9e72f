"""dp_accounting imported by its parts (src/dplab/dp_accounting_parts.py): an rdp job does not
import dp_accounting's pld package, and code written against the whole package still works."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import dplab
from dplab.accounting import Setting, get
setting = Setting(noise_multiplier=1.1, sampling_rate=0.01, steps=1000)
rdp = get("rdp").epsilon(setting, 1e-5)
parts = sorted(m for m in sys.modules if m.startswith(("dp_accounting.pld", "scipy.stats")))
import dp_accounting
whole = dp_accounting.NeighboringRelation is dp_accounting.privacy_accountant.NeighboringRelation
whole = whole and "dp_accounting.pld" in sys.modules
accountant = dp_accounting.rdp.RdpAccountant()
event = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
accountant.compose(event, 1000)
print(json.dumps({"parts": parts, "whole": whole, "rdp": rdp,
                  "library": accountant.get_epsilon(1e-5)}))
"""


def test_an_rdp_epsilon_imports_no_pld_and_the_whole_package_still_answers():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    found = json.loads(out)
    assert found["parts"] == []  # neither dp_accounting.pld nor scipy.stats
    assert found["whole"]  # the package's __init__ ran on the first name it defines
    # dp_accounting's own RdpAccountant, reached through the package, agrees with our rdp
    assert abs(found["rdp"] - found["library"]) < 1e-9
