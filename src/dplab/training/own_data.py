"""The user's own data: kind ``arrays`` (a .npz file), and what every own kind shares (``arrays``,
``csv`` in :mod:`dplab.training.csv_table`, ``image_folder`` in :mod:`dplab.training.image_folder`).

Each kind reads its source, checks it where it enters (``dplab prepare-data`` and the pipeline's
planning, :func:`dplab.training.data.expected_info`) and returns an :class:`Own`: float32
features (N, *shape) with no NaN or inf, int64 labels 0..K−1, every class with a training
record, the class names.  A problem is one :class:`~dplab.errors.DPLabError` naming the dataset
entry's key (``datasets.<name>.path`` for the file's contents) and the file.  A path is read from
the working directory (the project folder Snakemake and DVC run in).

``arrays``: a .npz holding ``x_train`` (N, *shape) numeric (bool, integer or float; any feature
shape: (d,) tabular, (c, h, w) images), ``y_train`` (N,) integer labels, and optionally
``x_test``, ``y_test``; no other array, nothing pickled.  The classes are 0..K−1 with K =
max(y_train) + 1, each with a training record (class names "0".."K−1"); a test label must be one
of them.  Without a test split the records are split by :func:`split`.  The features are kept as
given (cast to float32), so no feature-norm bound is guaranteed.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError
from dplab.inputs import input_file

#: the test share of :func:`split` where ``test_fraction`` is null
TEST_FRACTION = 0.2
#: the arrays a .npz of kind arrays may hold
NPZ_ARRAYS = ("x_train", "y_train", "x_test", "y_test")


@dataclass(frozen=True)
class Own:
    """An own dataset read and checked: ``train`` and ``test`` as {"x": float32, "y": int64}."""

    train: dict
    test: dict
    class_names: list[str]
    source: str
    preprocessing: str
    extra: dict = field(default_factory=dict)  #: more for info.json (csv: the features' encoding)


def data_file(cfg: dict, key: str) -> Path:
    """The entry's ``path`` as a readable regular file, else the error naming ``<key>.path``."""
    path = Path(cfg["path"])
    if not path.exists():
        raise DPLabError(f"{key}.path", f"no such file: {path}{_from_cwd(path)}")
    return input_file(path, f"{key}.path")


def _from_cwd(path: Path) -> str:
    return "" if path.is_absolute() else f" (read from the working directory {os.getcwd()})"


def data_folder(cfg: dict, key: str) -> Path:
    """The entry's ``path`` as an existing folder, else the error naming ``<key>.path``."""
    path = Path(cfg["path"])
    if not path.is_dir():
        what = "not a folder" if path.exists() else "no such folder"
        raise DPLabError(f"{key}.path", f"{what}: {path}{_from_cwd(path)}")
    return path


def features(x: np.ndarray, name: str, key: str) -> np.ndarray:
    """``x`` (N, *shape) as float32, refused unless numeric, with records and finite values."""
    if x.dtype.kind not in "biuf":
        raise DPLabError(
            key, f"{name} has dtype {x.dtype}; it must be numeric (bool, integer or float)"
        )
    if x.ndim < 2 or 0 in x.shape:
        raise DPLabError(
            key,
            f"{name} has shape {list(x.shape)}; it must be (records, *feature shape) with "
            "at least one record and feature, e.g. (N, d) or (N, c, h, w)",
        )
    with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf: refused below
        out = x.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(out.reshape(len(out), -1)).all(axis=1))
    if len(bad):
        raise DPLabError(
            key,
            f"{name} holds NaN or inf (as float32) in {len(bad)} record(s), the first at "
            f"index {bad[0]}; remove or impute them",
        )
    return out


def labels(y: np.ndarray, name: str, records: int, key: str) -> np.ndarray:
    """``y`` as int64 labels of ``records`` records, refused unless integer and one-dimensional."""
    if y.dtype.kind not in "iu":
        raise DPLabError(
            key, f"{name} has dtype {y.dtype}; it must hold integer class labels 0..K-1"
        )
    if y.shape != (records,):
        raise DPLabError(
            key,
            f"{name} has shape {list(y.shape)}; it must be ({records},), one label per record "
            "of the features",
        )
    return y.astype(np.int64)


def classes(y_train: np.ndarray, y_test: np.ndarray | None, key: str) -> int:
    """K = max(y_train) + 1, refused unless every label of y_train is in 0..K−1 with each class
    present, K ≥ 2, and every test label is in 0..K−1."""
    present = np.unique(y_train)
    if present[0] < 0:
        raise DPLabError(key, f"y_train holds label {present[0]}; labels must be 0..K-1")
    k = int(present[-1]) + 1
    if k < 2:
        raise DPLabError(key, "y_train holds one class (label 0); a classifier needs at least 2")
    if len(present) < k:
        gap = sorted(set(range(k)) - set(present.tolist()))[0]
        raise DPLabError(
            key,
            f"y_train has no record of class {gap} (labels 0..{k - 1}): the labels must be 0..K-1 "
            "with every class present; renumber them",
        )
    if y_test is not None and len(y_test) and not (0 <= y_test.min() and y_test.max() < k):
        bad = y_test.min() if y_test.min() < 0 else y_test.max()
        raise DPLabError(
            key,
            f"y_test holds label {bad}, which no training record has (training labels 0..{k - 1})",
        )
    return k


def split(x: np.ndarray, y: np.ndarray, cfg: dict, key: str) -> tuple[dict, dict]:
    """A seeded stratified split (scikit-learn's train_test_split: ⌈test_fraction·N⌉ test records,
    the classes' shares kept; ``test_fraction`` null: :data:`TEST_FRACTION`) into train and test."""
    from sklearn.model_selection import train_test_split

    fraction = TEST_FRACTION if cfg["test_fraction"] is None else cfg["test_fraction"]
    try:
        xtr, xte, ytr, yte = train_test_split(
            x, y, test_size=fraction, stratify=y, random_state=cfg["seed"]
        )
    except ValueError as err:
        raise DPLabError(
            f"{key}.test_fraction",
            f"a stratified split of {len(y)} records at {fraction} is "
            f"impossible: {str(err).splitlines()[0]}",
        ) from None
    return {"x": xtr, "y": ytr}, {"x": xte, "y": yte}


def own_split(cfg: dict, key: str) -> None:
    """Refuse ``test_fraction`` where the data hold their own test split."""
    if cfg["test_fraction"] is not None:
        raise DPLabError(
            f"{key}.test_fraction", "the data hold their own test split; leave test_fraction out"
        )


def read_arrays(cfg: dict, key: str) -> Own:
    """Kind ``arrays`` (module doc)."""
    path = data_file(cfg, key)
    where = f"{key}.path"
    arrays = _npz(path, where)
    unknown = sorted(set(arrays) - set(NPZ_ARRAYS))
    absent = [name for name in NPZ_ARRAYS[:2] if name not in arrays]
    if unknown or absent:
        problem = f"holds no {absent[0]}" if absent else f"holds an unknown array {unknown[0]!r}"
        raise DPLabError(
            where,
            f"{path} {problem}; an arrays dataset holds x_train, y_train and optionally "
            "x_test, y_test",
        )
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise DPLabError(where, f"{path} holds only one of x_test and y_test; give both or neither")
    x = features(arrays["x_train"], "x_train", where)
    y = labels(arrays["y_train"], "y_train", len(x), where)
    if "x_test" in arrays:
        own_split(cfg, key)
        x_test = features(arrays["x_test"], "x_test", where)
        if x_test.shape[1:] != x.shape[1:]:
            raise DPLabError(
                where,
                f"x_test has feature shape {list(x_test.shape[1:])}, x_train "
                f"{list(x.shape[1:])}; they must agree",
            )
        y_test = labels(arrays["y_test"], "y_test", len(x_test), where)
        k = classes(y, y_test, where)
        train, test = {"x": x, "y": y}, {"x": x_test, "y": y_test}
    else:
        k = classes(y, None, where)
        train, test = split(x, y, cfg, key)
    return Own(
        train,
        test,
        [str(c) for c in range(k)],
        f"the arrays of {path}",
        "cast to float32; none else",
    )


def _npz(path: Path, where: str) -> dict[str, np.ndarray]:
    """Every array of the .npz file ``path`` (read whole: each member's CRC
    checked), nothing unpickled."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DPLabError(
            where,
            f"{path} is not a readable .npz file ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:100]})",
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DPLabError(
            where,
            f"{path} holds a single array (.npy), not the named arrays of a .npz "
            "(numpy.savez(path, x_train=…, y_train=…))",
        )
    out = {}
    with archive:
        for name in archive.files:
            try:
                out[name] = archive[name]
            except ValueError:  # an object array: numpy would have to unpickle it
                raise DPLabError(
                    where,
                    f"{name} in {path} is an object array (dtype object); save a numeric array",
                ) from None
            except (OSError, EOFError, zipfile.BadZipFile) as err:
                raise DPLabError(
                    where, f"{name} in {path} is corrupt or truncated ({type(err).__name__})"
                ) from None
    return out
