"""MNIST from its IDX files (LeCun et al.): read raw or gzipped, verify, download if missing.

A dataset entry of kind ``mnist`` reads the four files below from its ``path`` (default
``data/mnist``, relative to the folder Snakemake runs in).  Files that are missing are downloaded
from ``mirror`` when ``download`` is true; without a network, or with ``download: false``, the
job stops with one line that names the key and the exact files to put where, with their MD5.
Every ``.gz`` file is checked against the published MD5 before use (a mismatch stops with an
error); uncompressed files are read unchecked (the published checksums are those of the ``.gz``).
The tests write tiny IDX files themselves and never touch the network.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import struct
import urllib.request
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError
from dplab.io import atomic_write
from dplab.progress import log

#: seconds a download may stall before it counts as failed
TIMEOUT = 60

#: file stem -> MD5 of the published ``.gz`` (the checksums torchvision and the mirrors list)
FILES = {
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}
#: the classes of MNIST and Fashion-MNIST, labelled 0..9
CLASSES = 10
_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(data: bytes, name: str = "IDX", key: str = "datasets.mnist") -> np.ndarray:
    """Parse one IDX file (magic 0x0000TTNN: type TT, NN dimensions, big-endian sizes)."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise DPLabError(key, f"{name} is not an IDX file (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = np.dtype(_DTYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise DPLabError(
            key, f"{name}: header says {shape} but the file holds {len(data) - header} bytes"
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def missing(folder: Path) -> list[str]:
    """The stems of :data:`FILES` found in ``folder`` neither gzipped nor raw."""
    return [
        stem
        for stem in FILES
        if not (folder / stem).exists() and not (folder / f"{stem}.gz").exists()
    ]


def instructions(folder: Path, key: str) -> str:
    """Where to put which files (one line): what the error of a failed or
    forbidden download says."""
    files = ", ".join(f"{stem}.gz (MD5 {md5})" for stem, md5 in FILES.items())
    return (
        f"put MNIST's four files, as published, into {folder.resolve()}: {files} (uncompressed"
        f" files of the same names are read too, unchecked), or set {key}.path to the folder"
        " holding them"
    )


def fetch(stem: str, folder: Path, mirror: str) -> None:
    """``mirror``/<stem>.gz → ``folder``/<stem>.gz (:func:`dplab.io.atomic_write`)."""

    def copy(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)

    with urllib.request.urlopen(mirror.rstrip("/") + f"/{stem}.gz", timeout=TIMEOUT) as src:  # noqa: S310
        atomic_write(folder / f"{stem}.gz", copy)


def read(stem: str, folder: Path, *, verify: bool, key: str) -> bytes:
    """The bytes of IDX file ``stem`` from ``folder`` (the .gz, checked, if
    present; else the raw file)."""
    raw, gz = folder / stem, folder / f"{stem}.gz"
    if gz.exists():
        if verify and _md5(gz) != FILES[stem]:
            raise DPLabError(
                f"{key}.verify_checksums",
                f"{gz}: MD5 {_md5(gz)} differs from the published {FILES[stem]}",
            )
        return gzip.decompress(gz.read_bytes())
    if verify:
        log.warning(
            "%s: uncompressed, so not checked against the published MD5 (only .gz files are)", raw
        )
    return raw.read_bytes()


def load(
    folder: str | Path, *, download: bool, mirror: str, verify: bool, key: str = "datasets.mnist"
) -> dict[str, np.ndarray]:
    """Train/test images (N, 28, 28) uint8 and labels (N,) of MNIST; ``key`` names the dataset
    entry in errors.  Missing files are downloaded first if ``download``."""
    folder = Path(folder)
    absent = missing(folder)
    if absent and not download:
        raise DPLabError(
            f"{key}.path",
            f"{', '.join(absent)} missing from {folder} and {key}.download is false: "
            f"{instructions(folder, key)}",
        )
    for stem in absent:
        try:
            fetch(stem, folder, mirror)
        except OSError as err:
            raise DPLabError(
                f"{key}.path",
                f"{', '.join(absent)} missing from {folder}, and the download of {stem}.gz "
                f"from {mirror} failed ({err}; no network?): {instructions(folder, key)}",
            ) from None
    return arrays(folder, verify=verify, key=key)


def arrays(folder: Path, *, verify: bool, key: str) -> dict[str, np.ndarray]:
    """``x_train``, ``y_train``, ``x_test``, ``y_test`` of the four IDX files in ``folder`` (MNIST's
    file names, which Fashion-MNIST shares: :mod:`dplab.training.fashion_mnist`)."""
    arrays = {
        stem: read_idx(read(stem, folder, verify=verify, key=key), stem, key) for stem in FILES
    }
    out = {
        "x_train": arrays["train-images-idx3-ubyte"],
        "y_train": arrays["train-labels-idx1-ubyte"],
        "x_test": arrays["t10k-images-idx3-ubyte"],
        "y_test": arrays["t10k-labels-idx1-ubyte"],
    }
    for split in ("train", "test"):
        if (
            out[f"x_{split}"].ndim != 3
            or out[f"y_{split}"].ndim != 1
            or len(out[f"x_{split}"]) != len(out[f"y_{split}"])
        ):
            raise DPLabError(key, f"{split} images and labels do not match in shape")
        labels = out[f"y_{split}"]
        if (
            len(labels) and not 0 <= labels.min() <= labels.max() < CLASSES
        ):  # else train refuses it only later
            raise DPLabError(
                key,
                f"{split} labels hold {labels.min()}..{labels.max()}, outside the {CLASSES} classes"
                f" 0..{CLASSES - 1}: not an (Fashion-)MNIST label file",
            )
    return out
