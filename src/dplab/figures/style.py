"""One plotting style for every figure: sizes, fonts, colours and markers per accountant.

matplotlib is imported by the functions that draw (:func:`pyplot`), not with this module: a
figure's table is computed without it."""

from __future__ import annotations

import io

from dplab.accounting.registry import ACCOUNTANTS

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


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def colour(accountant: str) -> str:
    """The accountant's fixed colour (its ``colour`` in :data:`ACCOUNTANTS`' metadata), so the
    same bound looks the same in every figure; dark grey for one without."""
    return ACCOUNTANTS.meta.get(accountant, {}).get("colour", "#333333")


def plain_log_ticks(ax, axis: str = "both") -> None:
    """Plain decimal tick labels on log axes (``0.5``, ``4``, ``1000``, not ``4×10⁰``):
    labels at 1, 2, 5 × 10^k (at 10^k only beyond 3 decades), none on other minor ticks.
    Call it after the data are plotted (it reads the axis limits)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for name in ("x", "y") if axis == "both" else (axis,):
        target = ax.xaxis if name == "x" else ax.yaxis
        if target.get_scale() != "log":
            continue
        lo, hi = sorted(ax.get_xlim() if name == "x" else ax.get_ylim())
        subs = (1.0, 2.0, 5.0) if hi / lo <= 1e3 else (1.0,)
        target.set_major_locator(LogLocator(base=10, subs=subs))
        target.set_major_formatter(plain)
        target.set_minor_formatter(NullFormatter())


def sci_offset(ax, axis: str = "y") -> None:
    """Linear axis with small values: ticks as 0, 1, 2 with a ×10⁻² offset
    (like the source papers)."""
    (ax.yaxis if axis == "y" else ax.xaxis).get_major_formatter().set_powerlimits((-2, 3))


def new_figure(ncols: int = 1, nrows: int = 1, **kwargs):
    """A styled figure and its axes."""
    plt = pyplot()
    with plt.rc_context(RC):
        width, height = RC["figure.figsize"]
        return plt.subplots(
            nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs
        )


def table_figure(
    header: list[str],
    cells: list[list[str]],
    width: float,
    row_height: float,
    fontsize: float,
    fills: list[str] | None = None,
):
    """A figure that is one table: bold grey header, left-aligned cells, each body row filled with
    ``fills[i]`` (white where None); returns (figure, axes) for the caller's title."""
    fig, axes = new_figure()
    ax = axes[0][0]
    fig.set_size_inches(width, row_height * (len(cells) + 2))
    ax.axis("off")
    grid = ax.table(
        cellText=cells, colLabels=header, bbox=[0, 0, 1, 1], cellLoc="left", colLoc="left"
    )
    grid.auto_set_font_size(False)
    grid.set_fontsize(fontsize)
    grid.auto_set_column_width(list(range(len(header))))
    for (r, _), cell in grid.get_celld().items():
        if r == 0:
            cell.set_text_props(weight="bold")
            cell.set_facecolor("#e8e8e8")
        elif fills:
            cell.set_facecolor(fills[r - 1])
    return fig, ax


def reserve_bottom(fig, fraction: float) -> None:
    """Lay the axes out above the bottom ``fraction`` of the figure (for a figure legend below
    every panel): :func:`save` keeps this layout instead of its plain tight layout."""
    fig.set_layout_engine("tight", rect=(0, fraction, 1, 1))


def save(fig, pdf: str, png: str) -> None:
    """Write the figure as PDF and PNG with a tight layout, then close it: both land, by rename,
    once both are written whole, or neither does (:func:`dplab.io.atomic_writes`).  Each is
    rendered in memory first, so a failed write (a full disk) is the plain ``OSError`` of the
    write, not an error of the PDF or PNG encoder left mid-stream."""
    from dplab.io import atomic_writes

    plt = pyplot()
    try:
        with plt.rc_context(RC):
            if fig.get_layout_engine() is None:
                fig.tight_layout()
            pdf_bytes = _render(fig, format="pdf", metadata={"CreationDate": None})
            png_bytes = _render(fig, format="png")
    finally:
        plt.close(fig)
    atomic_writes(
        {pdf: lambda tmp: tmp.write_bytes(pdf_bytes), png: lambda tmp: tmp.write_bytes(png_bytes)}
    )


def _render(fig, **kwargs) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, **kwargs)
    return buffer.getvalue()
