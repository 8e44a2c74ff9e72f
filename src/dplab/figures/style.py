"""One plotting style for every figure: sizes, fonts, colours and markers per accountant."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RC = {
    "figure.figsize": (6.4, 4.2),
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.6,
}

#: a fixed colour per accountant, so the same bound looks the same in every figure
ACCOUNTANT_COLOURS = {
    "naive": "#8c564b",
    "advanced": "#d62728",
    "kairouz": "#ff7f0e",
    "moments": "#bcbd22",
    "rdp": "#1f77b4",
    "rdp_closed_form": "#17becf",
    "pld": "#000000",
    "pabi": "#9467bd",
    "langevin": "#2ca02c",
    "ye_shokri": "#e377c2",
    "asoodeh_projected": "#7f7f7f",
    "asoodeh_regularized": "#aec7e8",
}


def colour(accountant: str) -> str:
    return ACCOUNTANT_COLOURS.get(accountant, "#333333")


def new_figure(ncols: int = 1, nrows: int = 1, **kwargs):
    """A styled figure and its axes."""
    with plt.rc_context(RC):
        width, height = RC["figure.figsize"]
        return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)


def save(fig, pdf: str, png: str) -> None:
    """Write the figure as PDF and PNG (each atomically), then close it."""
    from dplab.io import atomic_write

    with plt.rc_context(RC):
        fig.tight_layout()
        atomic_write(pdf, lambda tmp: fig.savefig(tmp, format="pdf"))
        atomic_write(png, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
