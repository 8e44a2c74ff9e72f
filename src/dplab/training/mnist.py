"""MNIST from its IDX files (LeCun et al.): read raw or gzipped, verify, download if missing.

Downloads happen only when a file is missing and ``download`` is true; every ``.gz`` file is
checked against the published MD5 before use (a mismatch stops with an error).  The tests write
tiny IDX files themselves and never touch the network.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import urllib.request
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError

#: file stem -> MD5 of the published ``.gz`` (the checksums torchvision and the mirrors list)
FILES = {
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}
_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(data: bytes, name: str = "IDX") -> np.ndarray:
    """Parse one IDX file (magic 0x0000TTNN: type TT, NN dimensions, big-endian sizes)."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise DPLabError("datasets.mnist", f"{name} is not an IDX file (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = np.dtype(_DTYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise DPLabError("datasets.mnist", f"{name}: header says {shape} but the file holds {len(data) - header} bytes")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def fetch(stem: str, folder: Path, *, download: bool, mirror: str, verify: bool) -> bytes:
    """The bytes of IDX file ``stem`` from ``folder`` (raw or .gz), downloading the .gz if allowed."""
    raw, gz = folder / stem, folder / f"{stem}.gz"
    if not raw.exists() and not gz.exists():
        if not download:
            raise DPLabError("datasets.mnist.path", f"{gz} (or {raw}) is missing and download is false")
        folder.mkdir(parents=True, exist_ok=True)
        tmp = gz.with_suffix(".gz.part")
        try:
            urllib.request.urlretrieve(mirror.rstrip("/") + f"/{stem}.gz", tmp)  # noqa: S310 (fixed https mirror)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise DPLabError("datasets.mnist.path", f"{gz} is missing and the download failed ({err})") from None
        tmp.replace(gz)
    if gz.exists():
        if verify and _md5(gz) != FILES[stem]:
            raise DPLabError("datasets.mnist.verify_checksums", f"{gz}: MD5 {_md5(gz)} differs from the published {FILES[stem]}")
        return gzip.decompress(gz.read_bytes())
    return raw.read_bytes()


def load(folder: str | Path, *, download: bool, mirror: str, verify: bool) -> dict[str, np.ndarray]:
    """Train/test images (N, 28, 28) uint8 and labels (N,) of MNIST."""
    folder = Path(folder)
    arrays = {stem: read_idx(fetch(stem, folder, download=download, mirror=mirror, verify=verify), stem) for stem in FILES}
    out = {
        "x_train": arrays["train-images-idx3-ubyte"],
        "y_train": arrays["train-labels-idx1-ubyte"],
        "x_test": arrays["t10k-images-idx3-ubyte"],
        "y_test": arrays["t10k-labels-idx1-ubyte"],
    }
    for split in ("train", "test"):
        if out[f"x_{split}"].ndim != 3 or out[f"y_{split}"].ndim != 1 or len(out[f"x_{split}"]) != len(out[f"y_{split}"]):
            raise DPLabError("datasets.mnist", f"{split} images and labels do not match in shape")
    return out
