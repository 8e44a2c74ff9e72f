"""Result tables (a sweep, an audit, a figure's table): written with their
row count, read back whole.

A CSV cut inside a line is caught by its missing final newline (:func:`dplab.inputs.read_csv`);
one cut exactly at a line boundary (whole rows missing) is still valid CSV.  Every table these
commands write therefore carries its own length: a last column :data:`ROWS` holding the number of
rows the writer wrote, on every row (so it survives any cut that leaves a row, and stays plain
CSV that pandas, DVC's plots and a spreadsheet read as before).  :func:`read_table` refuses a
table whose row count disagrees, naming the file, the rows expected and found, and returns it
without the column.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dplab.inputs import damaged, read_csv
from dplab.io import atomic_write

if TYPE_CHECKING:  # pandas is imported by the caller, which built or reads the frame
    import pandas as pd

#: the column holding the number of rows the writer wrote
ROWS = "table_rows"


def write_table(path: str | Path, frame: pd.DataFrame) -> None:
    """``frame`` as CSV at ``path`` (atomically), with its row count in the
    last column :data:`ROWS`."""
    if ROWS in frame.columns:
        raise ValueError(f"a result table may not have its own {ROWS!r} column")
    whole = frame.assign(**{ROWS: len(frame)})
    atomic_write(path, lambda tmp: whole.to_csv(tmp, index=False))


def read_table(path: str | Path, what: str, regenerate: str) -> pd.DataFrame:
    """The table ``path`` written by :func:`write_table` (holding ``what``; ``regenerate`` writes it
    again), without its :data:`ROWS` column: refused when it is not a whole CSV table
    (:func:`dplab.inputs.read_csv`), has no rows or no :data:`ROWS` column (written before the
    column existed, or by something else), or holds a number of rows other than the one recorded."""
    table = read_csv(path, what, regenerate)
    if ROWS not in table.columns:
        raise damaged(
            path,
            what,
            f"has no {ROWS!r} column (the row count every table dplab writes ends with)",
            regenerate,
        )
    if table.empty:
        raise damaged(path, what, "has a header but no rows (truncated)", regenerate)
    expected = table[ROWS].iloc[0]
    if table[ROWS].nunique() != 1 or expected != len(table):
        raise damaged(
            path,
            what,
            f"truncated or altered: {len(table)} rows where its writer wrote {expected}",
            regenerate,
        )
    return table.drop(columns=ROWS)
