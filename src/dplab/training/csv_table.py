"""Kind ``csv``: a table of records with a label column, encoded as features with the encoding
given under ``encoding`` or else fitted on the training split (docs/own_experiment.md states the
same rules).

- File: comma-separated, UTF-8 (a byte-order mark is dropped), a header row of distinct
  non-empty names, then one row per record with one cell per column; each cell is stripped of
  surrounding spaces.  ``label`` names the class column, ``features`` the feature columns
  (default: every other column, in the file's order).
- Missing values are refused: an empty cell in the label or a feature column is one error
  naming its line and column (fill or drop them first).
- Classes: the distinct label texts, sorted as integers where every label is one (so labels
  0..K−1 keep their numbers), else as text (Unicode code points); label k is the k-th.  At least
  2 classes.
- A column is numeric when every cell is a number as Python's ``float()`` reads it; one whose
  cells are all text is categorical; one mixing the two is refused (a missing-value marker such
  as "NA" in numbers?) unless listed under ``categorical``, as are number codes to one-hot encode.
  A number that is NaN or inf is refused.
- The split: seeded and stratified by class (:func:`dplab.training.own_data.split`), then:
- numeric column → one feature, (v − mean) / std with ``encoding``'s ``{mean, std}`` (std > 0),
  else the training split's mean and standard deviation (ddof 0; a column constant on the
  training split, std 0, is only centred: ÷ 1); refused where the fitted mean or std overflows
  float64 or an encoded value float32;
- categorical column → one 0/1 feature per category of ``encoding``'s ``{categories}``, else per
  category seen in the training split, in sorted order (Unicode code points), named
  ``column=value``; a value not among them sets none (all 0).
An ``encoding`` entry must name a feature column and suit its kind.  The features' names, each
column's mean, std or categories, and the columns fitted on the data (``fitted``: their encoding
depends on the training records, outside any ε) are recorded in info.json.  The features are
standardised, not bounded: no feature-norm bound is guaranteed.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError
from dplab.training.own_data import Own, data_file, split

INTEGER = re.compile(r"[+-]?\d+")


def read(cfg: dict, key: str) -> Own:
    """Kind ``csv`` (module doc)."""
    path = data_file(cfg, key)
    where = f"{key}.path"
    header, rows = _table(path, where)
    columns = _columns(cfg, header, path, key)
    cells = {name: [row[header.index(name)] for row in rows] for name in [cfg["label"], *columns]}
    for name, values in cells.items():
        if "" in values:
            line = values.index("") + 2
            raise DPLabError(
                where,
                f"{path} line {line}: column {name!r} is empty; missing values are refused "
                "(fill or drop them first)",
            )
    names = sorted(set(cells[cfg["label"]]), key=_class_order(cells[cfg["label"]]))
    if len(names) < 2:
        raise DPLabError(
            f"{key}.label",
            f"column {cfg['label']!r} of {path} holds one class ({names[0]!r}); "
            "a classifier needs at least 2",
        )
    index = {name: k for k, name in enumerate(names)}
    y = np.array([index[v] for v in cells[cfg["label"]]], dtype=np.int64)
    kinds = {
        name: _kind(name, cells[name], name in cfg["categorical"], path, where) for name in columns
    }
    _given(cfg, columns, kinds, key)
    train, test = split(np.arange(len(y)), y, cfg, key)
    encoded, encoding, feature_names, fitted = [], {}, [], []
    for name in columns:
        values, given = kinds[name], cfg["encoding"].get(name)
        if not given:
            fitted.append(name)
        if isinstance(values, np.ndarray):  # numeric
            column, mean, std = _numeric(name, values, given, train["x"], cells[name], path, where)
            encoded.append(column)
            encoding[name] = {"mean": mean, "std": std}
            feature_names.append(name)
        else:
            categories = sorted(given["categories"] if given else {values[i] for i in train["x"]})
            encoded.append(np.array(values)[:, None] == np.array(categories)[None, :])
            encoding[name] = {"categories": categories}
            feature_names += [f"{name}={c}" for c in categories]
    x = np.concatenate(encoded, axis=1).astype(np.float32)
    return Own(
        {"x": x[train["x"]], "y": train["y"]},
        {"x": x[test["x"]], "y": test["y"]},
        names,
        f"the table {path}, label column {cfg['label']!r}",
        "numeric columns standardised and categorical ones one-hot encoded, as given under "
        "encoding or else fitted on the training split (docs/own_experiment.md)",
        {"features": feature_names, "encoding": encoding, "fitted": fitted},
    )


def _given(cfg: dict, columns: list[str], kinds: dict, key: str) -> None:
    """Refuse an ``encoding`` entry that names no feature column, is neither {mean, std} nor
    {categories}, or does not fit its column's kind (the schema checks the values)."""
    for name, spec in cfg["encoding"].items():
        where = f"{key}.encoding.{name}"
        if name not in columns:
            raise DPLabError(
                where, f"{name!r} is not a feature column; feature columns: {', '.join(columns)}"
            )
        if set(spec) not in ({"mean", "std"}, {"categories"}):
            raise DPLabError(
                where,
                f"{f'has the keys {sorted(spec)}' if spec else 'is empty'}; give {{mean: m, "
                "std: s} (a numeric column, std > 0) or {categories: [...]} (a categorical one)",
            )
        numeric = isinstance(kinds[name], np.ndarray)
        if numeric and "categories" in spec:
            raise DPLabError(
                where,
                f"categories for {name!r}, a numeric column; list it under categorical to "
                "one-hot encode its numbers as codes, or give its mean and std",
            )
        if not numeric and "mean" in spec:
            raise DPLabError(
                where,
                f"mean and std for {name!r}, a categorical column (text, or listed under "
                "categorical); give its categories",
            )


def _numeric(
    name: str,
    values: np.ndarray,
    given: dict | None,
    rows: np.ndarray,
    cells: list[str],
    path: Path,
    where: str,
) -> tuple[np.ndarray, float, float]:
    """A numeric column as float32 (N, 1): (v − mean) / std with the ``given`` mean and std, else
    those of the training ``rows`` (÷ 1 where std is 0); and the mean and std.  Refused where the
    fitted mean or std overflows float64 or a value float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        if given:
            mean, std = float(given["mean"]), float(given["std"])
        else:
            mean, std = float(values[rows].mean()), float(values[rows].std())
        out = ((values - mean) / (std if std > 0 else 1.0)).astype(np.float32)
    if not (np.isfinite(mean) and np.isfinite(std)):
        i = rows[np.argmax(np.abs(values[rows]))]
        problem = (
            f"its training values are too large to standardise in float64 (mean {mean:g}, "
            f"std {std:g})"
        )
    elif not np.isfinite(out).all():
        i = np.flatnonzero(~np.isfinite(out))[0]
        source = "given under encoding" if given else "fitted on the training split"
        problem = (
            f"too large to standardise into float32 with mean {mean:g} and std {std:g} ({source})"
        )
    else:
        return out[:, None], mean, std
    raise DPLabError(
        where,
        f"{path} line {i + 2}: column {name!r} holds {cells[i]!r}, {problem}; rescale the column",
    )


def _table(path: Path, where: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ``path``, every cell stripped; refused unless rectangular, with
    distinct non-empty names and at least one record."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = [[cell.strip() for cell in row] for row in csv.reader(handle)]
    except (UnicodeDecodeError, csv.Error) as err:
        raise DPLabError(
            where,
            f"{path} is not a UTF-8 CSV table ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:100]})",
        ) from None
    while rows and not rows[-1]:  # blank lines at the end
        rows.pop()
    header, rows = (rows[0], rows[1:]) if rows else ([], [])
    if "" in header or len(set(header)) < len(header):
        bad = "" if "" in header else next(h for h in header if header.count(h) > 1)
        problem = "a column with no name" if bad == "" else f"the column {bad!r} twice"
        raise DPLabError(
            where, f"{path}'s header row has {problem}; every column needs its own name"
        )
    if not rows:
        raise DPLabError(where, f"{path} holds a header but no record")
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise DPLabError(
                where, f"{path} line {line} has {len(row)} cells, the header {len(header)}"
            )
    return header, rows


def _columns(cfg: dict, header: list[str], path: Path, key: str) -> list[str]:
    """The feature columns of the entry (``features``, else every column but the label), checked."""
    label = cfg["label"]
    if label not in header:
        raise DPLabError(
            f"{key}.label", f"no column {label!r} in {path}; its columns: {', '.join(header)}"
        )
    columns = cfg["features"] or [name for name in header if name != label]
    for name in columns:
        if name not in header:
            raise DPLabError(
                f"{key}.features", f"no column {name!r} in {path}; its columns: {', '.join(header)}"
            )
    if label in columns:
        raise DPLabError(f"{key}.features", f"holds the label column {label!r}")
    if not columns:
        raise DPLabError(f"{key}.path", f"{path} has no column besides the label {label!r}")
    for name in cfg["categorical"]:
        if name not in columns:
            raise DPLabError(
                f"{key}.categorical",
                f"{name!r} is not a feature column; feature columns: {', '.join(columns)}",
            )
    return columns


def _class_order(values: list[str]):
    """The sort key of the class names: as integers where every label is one, else as text."""
    if all(INTEGER.fullmatch(v) for v in values):
        return lambda v: (int(v), v)
    return lambda v: v


def _kind(
    name: str, values: list[str], categorical: bool, path: Path, where: str
) -> np.ndarray | list[str]:
    """A numeric column's values (float64), or a categorical column's texts (module doc)."""
    if categorical:
        return values
    numbers = [_number(value) for value in values]
    text = [i for i, number in enumerate(numbers) if number is None]
    if not text:
        out = np.array(numbers)
        bad = np.flatnonzero(~np.isfinite(out))
        if len(bad):
            raise DPLabError(
                where,
                f"{path} line {bad[0] + 2}: column {name!r} holds {values[bad[0]]!r}; NaN and "
                "inf are refused (remove or impute them)",
            )
        return out
    if len(text) < len(values):
        number = next(i for i, n in enumerate(numbers) if n is not None)
        raise DPLabError(
            where,
            f"column {name!r} of {path} mixes numbers (line {number + 2}: {values[number]!r}) "
            f"and text (line {text[0] + 2}: {values[text[0]]!r}); a missing-value marker? "
            "Missing values are refused; list the column under categorical to one-hot encode it",
        )
    return values


def _number(value: str) -> float | None:
    """``value`` as Python's ``float()`` reads it, or None."""
    try:
        return float(value)
    except ValueError:
        return None
