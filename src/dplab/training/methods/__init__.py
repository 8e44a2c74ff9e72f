"""The training methods of docs/training.md as plug-ins of the one loop of
:mod:`dplab.training.loop`.

Each module of this package (but :mod:`~dplab.training.methods.base`) holds one method, its
``METHOD``: a :class:`~dplab.training.methods.base.Method` declaring its sampler, noise,
update, projection, the run keys only it reads and which accountants may account for it.  The
loop, the preflight checks, the run resolution, the audit and the pipeline ask the method
(:data:`METHODS`, a lazy :class:`~dplab.registry.Registry`) instead of testing its name; a new
method is a new module here and a line in :data:`METHODS`.

Each method's source and update rule: docs/training.md's first table (generated from
:data:`METHODS` by ``python -m dplab.registries``).
"""

from __future__ import annotations

from dplab.accounting.eligibility import Update
from dplab.errors import DPLabError
from dplab.registry import Registry
from dplab.training.methods.base import Method
from dplab.training.settings import RunSettings

#: name -> its :class:`~dplab.training.methods.base.Method`, the ``METHOD`` of its module, in the
#: order the docs' tables list them (non-private first)
METHODS = Registry(
    "method",
    {
        "sgd": "dplab.training.methods.sgd:METHOD",
        "dp_sgd": "dplab.training.methods.dp_sgd:METHOD",
        "dp_gd": "dplab.training.methods.dp_gd:METHOD",
        "noisy_gd": "dplab.training.methods.noisy_gd:METHOD",
        "dp_sgd_fixed_batches": "dplab.training.methods.dp_sgd_fixed_batches:METHOD",
        "projected_dp_sgd": "dplab.training.methods.projected_dp_sgd:METHOD",
        "regularized_dp_sgd": "dplab.training.methods.regularized_dp_sgd:METHOD",
        "dp_mf": "dplab.training.methods.dp_mf:METHOD",
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
