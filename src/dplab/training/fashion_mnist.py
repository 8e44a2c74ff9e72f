"""Fashion-MNIST (Xiao, Rasul & Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking
Machine Learning Algorithms", 2017) from the IDX files Debian's package ``dataset-fashion-mnist``
installs, offline: 60000 training and 10000 test images of 28×28 grey pixels 0..255, ten classes
of clothing, 6000 and 1000 images per class.

The files have MNIST's names and format (read by :func:`dplab.training.mnist.arrays`).  A dataset
entry of kind ``fashion_mnist`` reads them from its ``path``, or, with ``path: null``, from the
folder ``dpkg -L dataset-fashion-mnist`` lists them in (``/usr/share/datasets/fashion-mnist`` on
Debian and Ubuntu).  Debian recompresses the ``.gz`` files, so the MD5s Fashion-MNIST publishes do
not apply and none is checked; the tests check the installed files' sizes and class balance.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError
from dplab.training import mnist

PACKAGE = "dataset-fashion-mnist"


def installed_folder() -> Path | None:
    """The folder of the package's ``train-images-idx3-ubyte.gz`` per ``dpkg -L``; None where dpkg
    is absent or the package is not installed."""
    try:
        listed = subprocess.run(
            ["dpkg", "-L", PACKAGE], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        return None
    files = [
        Path(line)
        for line in listed.splitlines()
        if Path(line).name.startswith("train-images-idx3-ubyte")
    ]
    return files[0].parent if files else None


def load(path: str | None, key: str) -> dict[str, np.ndarray]:
    """Train/test images (N, 28, 28) uint8 and labels (N,) from ``path`` or the Debian package's
    folder; one DPLabError naming ``key`` and the package when the files are not there."""
    folder = Path(path) if path is not None else installed_folder()
    absent = list(mnist.FILES) if folder is None else mnist.missing(folder)
    if absent:
        where = (
            f"{folder} lacks {', '.join(absent)}"
            if folder is not None
            else f"Debian's package {PACKAGE} is not installed"
        )
        raise DPLabError(
            f"{key}.path",
            f"Fashion-MNIST's IDX files not found ({where}): install them with "
            f"`apt-get install {PACKAGE}`, or set {key}.path to a folder holding "
            f"{', '.join(mnist.FILES)} (.gz or raw)",
        )
    return mnist.arrays(folder, verify=False, key=key)
