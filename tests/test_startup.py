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
def loaded():  # a library whose code ran: one of its modules (dp_accounting's bare package is not)
    return [m for m in heavy if any(k.startswith(m + ".") for k in sys.modules)]
from dplab.cli import build_parser
build_parser()
import dplab.accounting, dplab.figures.style
seen["parser"] = loaded()
from dplab import jobs, layout  # the Snakefile's plan, at every start of Snakemake
from dplab.config import load_yaml, validate
seen["runs"] = len(jobs.plan(validate(load_yaml("config/config.yaml"))).runs)
seen["plan"] = loaded()
seen["pld"] = [m for m in sys.modules if m.startswith("dp_accounting.pld")]
from dplab.figures import figure
for name in ("gaussian_sigma", "sigma_vs_steps", "techniques_table"):
    figure(name)
seen["tables"] = loaded()
print(json.dumps(seen))
"""

RDP_PROBE = """
import json, sys
import dplab
from dplab.accounting import Setting, get
setting = Setting(noise_multiplier=1.1, sampling_rate=0.01, steps=1000)
rdp = get("rdp").epsilon(setting, 1e-5)
sigma = get("rdp").sigma(setting, 2.0, 1e-5)  # a calibration: Brent's method, no scipy.optimize
parts = sorted(
    m for m in sys.modules if m.startswith(("dp_accounting.pld", "scipy.stats", "scipy.optimize"))
)
special_init = "scipy.special._basic" in sys.modules or "scipy._lib._array_api" in sys.modules
from scipy import special
early = {name: getattr(special, name) for name in dplab.package_parts.SPECIAL_UFUNCS}
special.logsumexp  # a name only scipy.special's __init__ defines: it runs now
same = all(getattr(special, name) is early[name] for name in early)
same = same and "scipy.special._basic" in sys.modules
import dp_accounting
whole = dp_accounting.NeighboringRelation is dp_accounting.privacy_accountant.NeighboringRelation
whole = whole and "dp_accounting.pld" in sys.modules
accountant = dp_accounting.rdp.RdpAccountant()
event = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
accountant.compose(event, 1000)
print(json.dumps({"parts": parts, "whole": whole, "rdp": rdp, "sigma": sigma,
                  "library": accountant.get_epsilon(1e-5), "special_init": special_init,
                  "special_same": same}))
"""


def probe(code: str) -> dict:
    """What ``code`` prints as JSON, run in a fresh interpreter on the repository's ``src``."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
        check=True,
    )
    return json.loads(out.stdout)


def test_the_parser_figure_tables_and_plan_import_no_library_they_do_not_use():
    """``dplab``'s parser (every subcommand registered), :mod:`dplab.accounting` (the Setting
    and the registry) and the figure style import none of :data:`HEAVY`; the modules of
    figures whose tables are computed from accountants import no matplotlib (drawing is
    another job) and no torch; planning config/config.yaml's jobs as the Snakefile does
    (validated, every run checked against its dataset) imports no torch (no network is built:
    a built-in model's parameters are counted, :func:`dplab.training.models.parameters`), no
    scipy.stats or scipy.optimize and no dp_accounting ``pld`` (each accountant's class is asked
    whether it applies; those libraries are imported where a bound is computed)."""
    seen = probe(PROBE)
    assert seen["parser"] == []
    assert "matplotlib" not in seen["tables"] and "torch" not in seen["tables"]
    assert "pandas" in seen["tables"]  # the probe does import what the tables use
    assert seen["runs"] > 0  # the probe does plan (and check) the default DAG's training runs
    assert not {"torch", "scipy.stats", "scipy.optimize"} & set(seen["plan"])
    assert seen["pld"] == []


def test_an_rdp_epsilon_imports_no_pld_and_the_whole_package_still_answers():
    """dp_accounting and scipy.special are imported by their parts (src/dplab/package_parts.py):
    rdp's ε and σ import neither dp_accounting's pld package nor scipy.stats, nor scipy.optimize
    (the root search is :func:`dplab.accounting.roots.brent`), nor run scipy.special's
    ``__init__`` (its array-API layer); a name of either whole package still resolves, and the
    ufuncs served before scipy.special's ``__init__`` are the very objects it exports."""
    found = probe(RDP_PROBE)
    assert found["parts"] == []  # no dp_accounting.pld, scipy.stats or scipy.optimize
    assert found["special_init"] is False
    assert found["special_same"] is True
    assert 1.0 < found["sigma"] < 1.1  # ε(1.1) < 2 at q = 0.01, T = 1000: the σ for ε = 2 is less
    assert found["whole"]  # the package's __init__ ran on the first name it defines
    # dp_accounting's own RdpAccountant, reached through the package, agrees with our rdp
    assert abs(found["rdp"] - found["library"]) < 1e-9


SETTLED_PROBE = """
import gc, json
from dplab.startup import settled_imports
seen = {"before": gc.isenabled(), "frozen_before": gc.get_freeze_count()}
with settled_imports():
    seen["inside"] = gc.isenabled()
    import fractions  # noqa: F401 (an import whose objects are then frozen)
seen["after"] = gc.isenabled()
seen["frozen"] = gc.get_freeze_count()
try:
    with settled_imports():
        garbage = [[]]  # allocated after the first freeze: not frozen by the second use
        raise KeyError
except KeyError:
    pass
seen["after_error"] = gc.isenabled()
seen["frozen_again"] = gc.get_freeze_count()
gc.disable()
with settled_imports():
    pass
seen["kept_disabled"] = not gc.isenabled()
print(json.dumps(seen))
"""


def test_a_command_s_imports_run_without_collections_and_are_frozen_once():
    """:func:`dplab.startup.settled_imports` pauses the cyclic collector for the block, freezes
    what exists the first time only, and leaves the collector as it found it, an error
    included."""
    seen = probe(SETTLED_PROBE)
    assert seen["before"] and not seen["inside"] and seen["after"] and seen["after_error"]
    assert seen["frozen_before"] == 0 < seen["frozen"] == seen["frozen_again"]
    assert seen["kept_disabled"]


STEP_PROBE = """
import json, sys
import torch
from torch import nn
from dplab.training import models
from dplab.training.per_example import clipped_grad_sum
torch.manual_seed(0)
SHAPES = ("sympy", "torch.fx.experimental.symbolic_shapes")
seen = {"torch": [m for m in SHAPES if m in sys.modules]}
stack = nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 3))
conv = nn.Sequential(nn.Conv2d(1, 2, 2), nn.Flatten(), nn.Linear(2, 3))
for model in (stack, conv):  # the Linear-stack path and the hooked path of ghost clipping
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(5, 1, 2, 2), torch.randint(0, 3, (5,))
    clipped_grad_sum(models.example_loss(model, 0.1), params, x, y, 1.0)
seen["step"] = [m for m in SHAPES if m in sys.modules]
print(json.dumps(seen))
"""


def test_a_dp_step_s_clipped_sum_imports_no_symbolic_shapes():
    """The clipped sum's backward pass asks autograd for the gradient of the summed losses:
    handed its gradient (``grad_outputs``) instead, autograd imports torch.fx's symbolic shapes
    and sympy (0.28 s of every training job's start-up on the 2-core machine)."""
    seen = probe(STEP_PROBE)
    assert seen == {"torch": [], "step": []}


FAULTS_PROBE = """
import ctypes, json, resource
from dplab.startup import keep_freed_memory
kept = keep_freed_memory() if KEEP else None
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
size, faults = 10 << 20, []
for _ in range(4):  # five 10 MiB temporaries of a step, made, written and freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(size) for _ in range(5)]
    for block in blocks:
        ctypes.memset(block, 1, size)
    for block in blocks:
        libc.free(ctypes.c_void_p(block))
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"kept": kept, "faults": faults}))
"""


def test_a_command_keeps_freed_memory_for_its_next_step():
    """:func:`dplab.startup.keep_freed_memory` (every command's start-up): after the first step,
    a step's freed temporaries are reused, not mapped and faulted in afresh; under glibc's own
    thresholds each of these steps faults in its 50 MiB again (12,800 pages of 4 KiB)."""
    kept = probe(FAULTS_PROBE.replace("KEEP", "True"))
    default = probe(FAULTS_PROBE.replace("KEEP", "False"))
    assert kept["kept"] is True and max(kept["faults"][1:]) < 100
    assert min(default["faults"][1:]) > 10_000
