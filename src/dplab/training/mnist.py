"""MNIST from its IDX files (LeCun et al.): read raw or gzipped, verify, download if missing.

A dataset entry of kind ``mnist`` reads the four files below from its ``path`` (default
``data/mnist``, relative to the folder Snakemake runs in).  Files that are missing are downloaded
from ``mirror`` when ``download`` is true; without a network, or with ``download: false``, the
job stops with one line that names the key and the exact files to put where, with their MD5.
Every ``.gz`` file is checked against the published MD5 before use (a mismatch stops with an
error); uncompressed files are read unchecked (the published checksums are those of the ``.gz``).
Refused, in one line naming ``path`` and the file (:func:`read`, :func:`read_idx`,
:func:`arrays`): a ``.gz`` that does not decompress, an IDX file of another data type than
unsigned bytes, images not 28×28, a file of no record, images and labels of different counts,
a label outside 0..9.
The tests write tiny IDX files themselves and never touch the network.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import shutil
import struct
import urllib.request
import zlib
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
#: IDX data type of unsigned bytes, the only one (Fashion-)MNIST's files use
UBYTE = 0x08
#: the names of IDX's other data types (in errors)
TYPES = {0x09: "signed bytes", 0x0B: "int16", 0x0C: "int32", 0x0D: "float32", 0x0E: "float64"}
#: the shape of one record of each file: images 28×28, labels scalars
RECORD = {stem: (28, 28) if "images" in stem else () for stem in FILES}


def read_idx(data: bytes, record: tuple[int, ...], name: str, key: str) -> np.ndarray:
    """Parse one IDX file of unsigned bytes (magic 0x000008NN: NN dimensions, big-endian sizes)
    holding N ≥ 1 records of shape ``record``; ``name`` (the file) and ``key`` name it in errors."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DPLabError(key, f"{name} is not an IDX file (bad magic number)")
    if data[2] != UBYTE:
        raise DPLabError(
            key,
            f"{name} holds IDX data type 0x{data[2]:02X} ({TYPES.get(data[2], 'unknown')}), but "
            f"(Fashion-)MNIST's files hold unsigned bytes (0x{UBYTE:02X})",
        )
    ndim, want = data[3], 1 + len(record)
    if ndim != want:
        raise DPLabError(
            key, f"{name} has {ndim} dimensions; a (Fashion-)MNIST file of this name has {want}"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DPLabError(key, f"{name} ends inside its header ({len(data)} of {header} bytes)")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    what = "images" if record else "labels"
    if shape[1:] != record:
        raise DPLabError(
            key,
            f"{name} holds {'×'.join(map(str, shape[1:]))} {what}, but (Fashion-)MNIST's are "
            f"{'×'.join(map(str, record))}",
        )
    if shape[0] == 0:
        raise DPLabError(key, f"{name} holds 0 {what}")
    if len(data) - header != math.prod(shape):
        raise DPLabError(
            key, f"{name}: header says {shape} but the file holds {len(data) - header} bytes"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


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


def read(stem: str, folder: Path, *, verify: bool, key: str) -> tuple[Path, bytes]:
    """The file read for ``stem`` in ``folder`` (the .gz, checked, if present; else the raw file)
    and its IDX bytes; a .gz that does not decompress is a DPLabError naming ``key``.path."""
    raw, gz = folder / stem, folder / f"{stem}.gz"
    if gz.exists():
        blob = gz.read_bytes()
        md5 = hashlib.md5(blob).hexdigest()
        if verify and md5 != FILES[stem]:
            raise DPLabError(
                f"{key}.verify_checksums",
                f"{gz}: MD5 {md5} differs from the published {FILES[stem]}",
            )
        try:
            return gz, gzip.decompress(blob)
        except (OSError, EOFError, zlib.error) as err:  # BadGzipFile is an OSError
            raise DPLabError(
                f"{key}.path",
                f"{gz} is not a complete gzip file ({type(err).__name__}: {err}); "
                "download or copy it again",
            ) from None
    if verify:
        log.warning(
            "%s: uncompressed, so not checked against the published MD5 (only .gz files are)", raw
        )
    return raw, raw.read_bytes()


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
    where = f"{key}.path"
    paths, arrays = {}, {}
    for stem in FILES:
        paths[stem], data = read(stem, folder, verify=verify, key=key)
        arrays[stem] = read_idx(data, RECORD[stem], str(paths[stem]), where)
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"
        x, y = arrays[images], arrays[labels]
        if len(x) != len(y):
            raise DPLabError(
                where, f"{paths[labels]} holds {len(y)} labels, but {paths[images]} {len(x)} images"
            )
        if y.max() >= CLASSES:  # else train refuses it only later
            raise DPLabError(
                where,
                f"{paths[labels]}: labels hold {y.min()}..{y.max()}, outside the {CLASSES} classes"
                f" 0..{CLASSES - 1}: not a (Fashion-)MNIST label file",
            )
        out[f"x_{split}"], out[f"y_{split}"] = x, y
    return out
