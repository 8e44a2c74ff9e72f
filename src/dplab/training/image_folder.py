"""Kind ``image_folder``: image files in torchvision's ImageFolder layout, read with Pillow.

``path/train/<class>/…`` and optionally ``path/test/<class>/…``: the classes are the folder
names under train/, sorted (Unicode code points, as ImageFolder sorts them): class k is the
k-th.  A class folder's images are every file below it (subfolders too, those reached through
symbolic links as well) in sorted path order; names starting with "." are skipped; any other file
must have an image extension (those of torchvision: :data:`EXTENSIONS`).  Refused: a file directly
in train/ or test/, a broken symbolic link, a link back to a folder above it (a cycle), an entry
neither a file nor a folder (a FIFO), an empty class folder, fewer than 2 classes, a test class
with no train/ folder, an image that is not ``size`` = [h, w] (unless ``resize``: Pillow's
bilinear resize) or not of the mode of ``channels`` (1: "L", 3: "RGB"; unless ``convert``:
Pillow's ``Image.convert``), an image Pillow cannot read.  Without test/ the images are split by
:func:`dplab.training.own_data.split`.

Pixels 0..255 divided by 255 into [0, 1], shape (channels, h, w): every record has
||x|| ≤ R = √(channels·h·w), as for the other image kinds.  Planning reads the images' headers
only (:func:`describe`); ``dplab prepare-data`` decodes them (:func:`read`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dplab.errors import DPLabError
from dplab.training.own_data import Own, data_folder, own_split, split

#: torchvision's IMG_EXTENSIONS (compared in lower case)
EXTENSIONS = (".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp")
#: Pillow's image mode of each number of channels
MODES = {1: "L", 3: "RGB"}
SPLITS = ("train", "test")


def listing(cfg: dict, key: str) -> dict[str, list[tuple[str, Path]]]:
    """(class, image file) of each split present, classes sorted, files sorted (module doc)."""
    root = data_folder(cfg, key)
    where = f"{key}.path"
    if not (root / "train").is_dir():
        raise DPLabError(
            where,
            f"{root} holds no train/ folder; an image_folder dataset is "
            "path/train/<class>/<image> (and optionally path/test/<class>/<image>)",
        )
    out = {}
    for part in SPLITS:
        folder = root / part
        if not folder.is_dir():
            continue
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
        for p in entries:
            _refuse_odd(p, where)
        loose = [p for p in entries if not p.is_dir()]
        if loose:
            raise DPLabError(
                where,
                f"{loose[0]} lies directly in {part}/; each image belongs in a class folder "
                f"{part}/<class>/",
            )
        if not entries:
            raise DPLabError(where, f"{folder} holds no class folder")
        out[part] = []
        for folder in entries:
            images = _below(folder, where)
            other = [p for p in images if p.suffix.lower() not in EXTENSIONS]
            if other:
                raise DPLabError(
                    where,
                    f"{other[0]} is not an image file (extensions: {', '.join(EXTENSIONS)}); "
                    "move it out of the class folder",
                )
            if not images:
                raise DPLabError(
                    where, f"the class folder {folder} holds no image; remove it or add images"
                )
            out[part] += [(folder.name, p) for p in images]
    _refuse_twice(out["train"], where)
    names = sorted({c for c, _ in out["train"]})
    if len(names) < 2:
        raise DPLabError(
            where, f"{root / 'train'} holds one class ({names[0]!r}); a classifier needs at least 2"
        )
    unknown = sorted({c for c, _ in out.get("test", [])} - set(names))
    if unknown:
        raise DPLabError(
            where,
            f"{root / 'test' / unknown[0]} is a test class with no training folder "
            f"{root / 'train' / unknown[0]}; the test classes must be training classes",
        )
    return out


def _below(folder: Path, where: str) -> list[Path]:
    """The files below ``folder`` in sorted path order, names starting with "." skipped, through
    linked folders too (as ImageFolder's ``os.walk(followlinks=True)``); a link back to a folder
    above it (a cycle) and an odd entry (:func:`_refuse_odd`) are refused."""
    parent = Path(os.path.realpath(folder.parent))
    found, todo = [], [(folder, tuple(map(str, (parent, *parent.parents))))]
    while todo:
        here, above = todo.pop()
        real = os.path.realpath(here)
        if real in above:
            raise DPLabError(
                where,
                f"{here} leads back to {real}, a folder above it (a cycle of symbolic links); "
                "remove the link",
            )
        for p in sorted(here.iterdir()):
            if p.name.startswith("."):
                continue
            _refuse_odd(p, where)
            if p.is_dir():
                todo.append((p, (*above, real)))
            else:
                found.append(p)
    return sorted(found)


def _refuse_twice(images: list[tuple[str, Path]], where: str) -> None:
    """Refuse two training paths that are one file (a linked file or class folder, a hard link):
    the accountant's record is a path, so that image would be trained as two records (under two
    classes where a class folder links to another) and ε would hold for it only as a group's."""
    seen: dict[tuple[int, int], tuple[str, Path]] = {}
    for label, path in images:
        info = path.stat()
        first = seen.setdefault((info.st_dev, info.st_ino), (label, path))
        if first[1] != path:
            raise DPLabError(
                where,
                f"{first[1]} (class {first[0]!r}) and {path} (class {label!r}) are one file (a"
                " link): it would be trained as two records, and ε covers each record, not each"
                " image; keep one",
            )


def _refuse_odd(path: Path, where: str) -> None:
    """Refuse ``path`` if it is a broken symbolic link, or neither a file nor a folder."""
    if path.is_symlink() and not path.exists():
        raise DPLabError(
            where,
            f"{path} is a broken symbolic link (to {os.readlink(path)}); remove it or restore "
            "its target",
        )
    if not path.is_dir() and not path.is_file():
        raise DPLabError(where, f"{path} is neither a file nor a folder; remove it")


def files(cfg: dict, key: str) -> list[str]:
    """Every image file the entry reads, as paths under its ``path`` as given (a job's inputs)."""
    return [str(p) for images in listing(cfg, key).values() for _, p in images]


def describe(cfg: dict, key: str) -> dict:
    """train_size, input_shape and classes, from the images' headers (size and mode checked)."""
    found = listing(cfg, key)
    for images in found.values():
        for _, path in images:
            _image(path, cfg, key, decode=False)
    names = sorted({c for c, _ in found["train"]})
    if "test" in found:
        own_split(cfg, key)
        n = len(found["train"])
    else:
        y = np.array([names.index(c) for c, _ in found["train"]])
        n = len(split(np.zeros((len(y), 1)), y, cfg, key)[0]["y"])
    return {"train_size": n, "input_shape": [cfg["channels"], *cfg["size"]], "classes": len(names)}


def read(cfg: dict, key: str) -> Own:
    """Kind ``image_folder`` (module doc)."""
    found = listing(cfg, key)
    names = sorted({c for c, _ in found["train"]})
    arrays = {}
    for part, images in found.items():
        x = (
            np.stack([_image(path, cfg, key, decode=True) for _, path in images]).astype(np.float32)
            / 255.0
        )
        arrays[part] = {"x": x, "y": np.array([names.index(c) for c, _ in images], dtype=np.int64)}
    if "test" in arrays:
        own_split(cfg, key)
        train, test = arrays["train"], arrays["test"]
    else:
        train, test = split(arrays["train"]["x"], arrays["train"]["y"], cfg, key)
    h, w = cfg["size"]
    return Own(
        train,
        test,
        names,
        f"the images of {cfg['path']} (train/<class>/, test/<class>/)",
        f"{MODES[cfg['channels']]} images of {h}×{w}"
        + (", others resized (bilinear)" if cfg["resize"] else "")
        + (", other modes converted" if cfg["convert"] else "")
        + "; pixels 0..255 divided by 255 into [0, 1]",
    )


def _image(path: Path, cfg: dict, key: str, decode: bool) -> np.ndarray | None:
    """The pixels of ``path`` (channels, h, w) as uint8 (``decode``), else only its size and mode
    checked; refused as the module doc says."""
    from PIL import Image

    h, w = cfg["size"]
    mode = MODES[cfg["channels"]]
    problem = pixels = None
    try:
        with Image.open(path) as image:
            if image.mode != mode and not cfg["convert"]:
                problem = (
                    f"is a {image.mode} image, but channels {cfg['channels']} reads {mode} images; "
                    "convert the images or set convert: true"
                )
            elif image.size != (w, h) and not cfg["resize"]:
                problem = (
                    f"is {image.size[1]}×{image.size[0]} (height×width), but size is [{h}, {w}];"
                    " resize the images or set resize: true"
                )
            elif decode:
                image = image.convert(mode) if image.mode != mode else image
                image = (
                    image.resize((w, h), Image.Resampling.BILINEAR)
                    if image.size != (w, h)
                    else image
                )
                pixels = np.asarray(image, dtype=np.uint8)
    except (OSError, SyntaxError, Image.DecompressionBombError) as err:
        problem = (
            f"cannot be read as an image ({type(err).__name__}: {str(err).splitlines()[0][:100]})"
        )
    if problem:
        raise DPLabError(f"{key}.path", f"{path} {problem}")
    if pixels is None:
        return None
    return pixels[None] if pixels.ndim == 2 else pixels.transpose(2, 0, 1)
