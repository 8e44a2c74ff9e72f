"""The training methods of docs/training.md as plug-ins of the one loop of
:mod:`dplab.training.loop`.

Each module of this package (but :mod:`~dplab.training.methods.base`) holds one method, its
``METHOD``: a :class:`~dplab.training.methods.base.Method` declaring its sampler, noise,
update, projection, the run keys only it reads and which accountants may account for it.  The
loop, the preflight checks, the run resolution, the audit and the pipeline ask the method
(:data:`METHODS`, a lazy :class:`~dplab.registry.Registry`) instead of testing its name; a new
method is a new module here and a line in :data:`METHODS`.

====================  ==========================  ============================================
method                source                      update (g = Σ clip(∇ℓ_i) over the batch B)
====================  ==========================  ============================================
sgd                   003 Alg. 1                  w ← w − η·mean(∇ℓ_i)  (no clip, no noise)
dp_sgd                003 Alg. 2; 000 Alg. 1      w ← w − η·(g + σC·Z)/b, Poisson batches
                      (Abadi et al.)
dp_gd                 004 §3.1–3.3                w ← w − η·(g + σC·Z)/n, full batch
noisy_gd              002 Alg. 1                  w ← Π(w − η·(g + σC·Z)/n); √(2η)σ₀₀₂ = ησC/n
dp_sgd_fixed_batches  000 Alg. 2                  w ← w − η·(g + σC·Z)/b, fixed batches cycled
projected_dp_sgd      001 eq. (1), (12)           w ← Π_D(w − η·g/|B| + σ_A·Z), σ_A = ησC/b
regularized_dp_sgd    001 eq. (16)-(17)           w ← (1−λ)w − η·g/|B| + σ_A·Z
dp_mf                 004 §4.3;                   w ← w − η·(g + (C⁻¹Z)_t)/b, MF samplers
                      Choquette-Choo et al. 2023
====================  ==========================  ============================================
"""

from __future__ import annotations

from dplab.accounting.eligibility import Update
from dplab.errors import DPLabError
from dplab.registry import Registry
from dplab.training.methods.base import Method
from dplab.training.settings import RunSettings

#: name -> its :class:`~dplab.training.methods.base.Method`, the ``METHOD`` of its module
METHODS = Registry(
    "method",
    {
        "dp_gd": "dplab.training.methods.dp_gd:METHOD",
        "dp_mf": "dplab.training.methods.dp_mf:METHOD",
        "dp_sgd": "dplab.training.methods.dp_sgd:METHOD",
        "dp_sgd_fixed_batches": "dplab.training.methods.dp_sgd_fixed_batches:METHOD",
        "noisy_gd": "dplab.training.methods.noisy_gd:METHOD",
        "projected_dp_sgd": "dplab.training.methods.projected_dp_sgd:METHOD",
        "regularized_dp_sgd": "dplab.training.methods.regularized_dp_sgd:METHOD",
        "sgd": "dplab.training.methods.sgd:METHOD",
    },
)


def get(name: str) -> Method:
    """The method called ``name`` (DPLabError naming the valid ones otherwise)."""
    if name not in METHODS:
        raise DPLabError(
            "method", f"must be one of {', '.join(METHODS)} (dplab.training.methods); got {name!r}"
        )
    return METHODS[name]


def run_factorization(entry: dict) -> str | None:
    """The cache key of the factorization a run entry trains with
    (:meth:`Method.factorization`), or None."""
    spec = get(entry["method"]).factorization(entry)
    return spec[0] if spec else None


def update_of(run: RunSettings) -> Update:
    """The engine's update of a resolved run (:meth:`Method.update`)."""
    return METHODS[run.method].update(run)
