"""What a job imports before its work: each command pays only for the libraries it uses
(benchmarks/startup.py times it; here, the import sets, which do not depend on the machine)."""

import json
import subprocess
import sys

from conftest import ROOT

#: libraries that take a second or more to import on the 2-core machines this project targets
HEAVY = (
    "torch",
    "scipy.optimize",
    "scipy.stats",
    "dp_accounting",
    "matplotlib",
    "pandas",
    "jsonschema",
)

PROBE = f"""
import json, sys
heavy = {HEAVY!r}
seen = {{}}
from dplab.cli import build_parser
build_parser()
import dplab.accounting, dplab.figures.style
seen["parser"] = [m for m in heavy if m in sys.modules]
from dplab.figures import figure
for name in ("gaussian_sigma", "sigma_vs_steps", "techniques_table"):
    figure(name)
seen["tables"] = [m for m in heavy if m in sys.modules]
print(json.dumps(seen))
"""


def test_the_parser_and_figure_tables_import_no_library_they_do_not_use():
    """``dplab``'s parser (every subcommand registered), :mod:`dplab.accounting` (the Setting
    and the registry) and the figure style import none of :data:`HEAVY`; the modules of
    figures whose tables are computed from accountants import no matplotlib (drawing is
    another job) and no torch."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
        check=True,
    )
    seen = json.loads(out.stdout)
    assert seen["parser"] == []
    assert "matplotlib" not in seen["tables"] and "torch" not in seen["tables"]
    assert "pandas" in seen["tables"]  # the probe does import what the tables use
