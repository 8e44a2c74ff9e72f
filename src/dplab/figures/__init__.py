"""Figures (README.md, Figures): one module per figure id, named in :data:`FIGURES` and imported
when first needed; a new figure is its module and a line there.

Every figure module implements :class:`Figure` (the module itself is the implementation, checked
by tests/test_figure_protocol.py): its title, source and caption (the one description of the
figure: the report shows it), the schema of its config entry (``PARAMS``, which
``python -m dplab.registries`` writes into config.schema.yaml), its named inputs, the tidy table
it computes from them and the drawing it makes from that table alone (so a figure can be redrawn
without recomputing anything).  A figure drawn from factorizations of the MF mechanism also defines
``factorizations(config, params)`` (cache key -> spec; the pipeline computes each once, see
:func:`dplab.jobs.factorizations`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from dplab.errors import DPLabError
from dplab.registry import Registry

if TYPE_CHECKING:
    import matplotlib.figure
    import pandas as pd

#: the input files of a figure's table by name: one path (``str``) or a list of paths
Inputs = dict[str, "str | list[str]"]

#: figure id -> its module, in the order the index and the report list them
FIGURES = Registry(
    "figure",
    {
        "claims": "dplab.figures.claims",
        "gaussian_sigma": "dplab.figures.gaussian_sigma",
        "grad_norms": "dplab.figures.grad_norms",
        "nonprivate_training": "dplab.figures.nonprivate_training",
        "sigma_vs_steps": "dplab.figures.sigma_vs_steps",
        "dp_training_tries": "dplab.figures.dp_training_tries",
        "techniques_table": "dplab.figures.techniques_table",
        "asoodeh_projected": "dplab.figures.asoodeh_projected",
        "asoodeh_regularized": "dplab.figures.asoodeh_regularized",
        "langevin_rdp": "dplab.figures.langevin_rdp",
        "langevin_tightness": "dplab.figures.langevin_tightness",
        "accountants_vs_pld": "dplab.figures.accountants_vs_pld",
        "hidden_state_gain": "dplab.figures.hidden_state_gain",
        "privacy_utility": "dplab.figures.privacy_utility",
        "mf_vs_dpsgd": "dplab.figures.mf_vs_dpsgd",
        "mf_regime": "dplab.figures.mf_regime",
        "mf_structure": "dplab.figures.mf_structure",
        "mf_scale": "dplab.figures.mf_scale",
        "tightness_audit": "dplab.figures.tightness_audit",
        "sampling_gap": "dplab.figures.sampling_gap",
        "individual_privacy": "dplab.figures.individual_privacy",
        "risk_calibration": "dplab.figures.risk_calibration",
    },
)


@runtime_checkable
class Figure(Protocol):
    """What a figure module defines.

    ``INPUTS`` names each input of the table and its kind: ``str`` (one file) or ``list``
    (files, in order); ``inputs`` returns exactly those names for a config entry, ``table``
    reads them by name."""

    TITLE: str  #: one line: the index's title
    SOURCE: str  #: the source paper's figure it reproduces, or "new"
    #: reST read after the id ("**id** CAPTION" in the report): what is drawn, how to read it
    CAPTION: str
    INPUTS: dict[str, type]
    PARAMS: dict  #: the JSON schema of its ``figures.<id>`` entry (config.schema.yaml's, generated)

    def check(self, config: dict, params: dict) -> None:
        """Cross-references of the figure's config entry ``params`` (raise DPLabError)."""

    def inputs(self, config: dict, params: dict) -> Inputs:
        """The result files the table is made from, by name."""

    def table(self, inputs: Inputs, params: dict) -> pd.DataFrame:
        """Tidy: one row per plotted point, canonical column names."""

    def draw(self, table: pd.DataFrame) -> matplotlib.figure.Figure:
        """The figure, from its table alone."""


def figure(figure_id: str) -> Figure:
    """The module of ``figure_id`` (one of :data:`FIGURES`; a KeyError otherwise)."""
    return FIGURES[figure_id]


def _named_files(inputs: Inputs) -> list[tuple[str, str]]:
    return [
        (name, path)
        for name, value in inputs.items()
        for path in ([value] if isinstance(value, str) else value)
    ]


def input_files(inputs: Inputs) -> list[str]:
    """Every path of ``inputs``, in order."""
    return [path for _, path in _named_files(inputs)]


def input_args(inputs: Inputs) -> list[str]:
    """``inputs`` as the arguments of ``dplab figure-table --inputs``: ``NAME=PATH``, once per
    path of a list (in order)."""
    return [f"{name}={path}" for name, path in _named_files(inputs)]


def parse_input_args(figure_id: str, args: list[str]) -> Inputs:
    """The inverse of :func:`input_args` for ``figure_id``; a :class:`DPLabError` on ``--inputs``
    for a malformed argument, an unknown name, or a one-file input given not exactly once."""
    kinds = figure(figure_id).INPUTS
    takes = f"figure {figure_id} takes " + (
        ", ".join(f"{n}=PATH" + (" …" if k is list else "") for n, k in kinds.items())
        or "no inputs"
    )
    given: dict[str, list[str]] = {}
    for arg in args:
        name, sep, path = arg.partition("=")
        if not sep or not path or name not in kinds:
            raise DPLabError(
                "--inputs", f"{arg!r} is not NAME=PATH with a name of the figure; {takes}"
            )
        given.setdefault(name, []).append(path)
    inputs: Inputs = {}
    for name, kind in kinds.items():
        paths = given.get(name, [])
        if kind is str and len(paths) != 1:
            raise DPLabError(
                "--inputs", f"{name}=PATH given {len(paths)} times, needs exactly one; {takes}"
            )
        inputs[name] = paths[0] if kind is str else paths
    return inputs
