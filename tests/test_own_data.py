"""The user's own data (kinds arrays, csv, image_folder): what prepare-data writes, checked
against scikit-learn's encoders and the source files; each bad input refused in one line naming
the key, before any data are written; the data files as inputs of their jobs and of provenance."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from PIL import Image

from conftest import ROOT
from dplab import jobs
from dplab.cli import main
from dplab.config import validate
from dplab.errors import DPLabError
from dplab.training import data


def _prepare(entry: dict, name: str = "own"):
    return data.prepare(data.resolve_dataset(entry, name), name)


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def _images(root, layout: dict, size=(4, 3), mode="L", seed=0):
    """PNG files root/<split>/<class>/<i>.png, ``layout``: {split: {class: count}}; their pixels."""
    rng = np.random.default_rng(seed)
    pixels = {}
    for part, counts in layout.items():
        for cls, count in counts.items():
            (root / part / cls).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                shape = (size[1], size[0]) + ((3,) if mode == "RGB" else ())
                arr = rng.integers(0, 256, shape, dtype=np.uint8)
                Image.fromarray(arr, mode).save(root / part / cls / f"{i}.png")
                pixels[(part, cls, i)] = arr
    return pixels


def test_arrays_with_a_test_split_keep_the_records_and_any_feature_shape(tmp_path):
    rng = np.random.default_rng(0)
    x, xt = rng.normal(size=(12, 2, 3, 3)), rng.normal(size=(5, 2, 3, 3))
    y, yt = np.arange(12) % 3, np.array([0, 1, 2, 2, 1])
    path = _npz(tmp_path / "d.npz", x_train=x, y_train=y, x_test=xt, y_test=yt.astype(np.uint8))
    train, test, info = _prepare({"kind": "arrays", "path": path})
    assert np.array_equal(train["x"], x.astype(np.float32)) and np.array_equal(test["y"], yt)
    assert (info["input_shape"], info["classes"], info["class_names"]) == (
        [2, 3, 3],
        3,
        ["0", "1", "2"],
    )
    assert info["feature_norm_bound"] is None and info["logreg_constants"] is None
    cfg = data.resolve_dataset({"kind": "arrays", "path": path}, "own")
    assert data.expected_info(cfg, "own") == {
        k: info[k] for k in ("train_size", "input_shape", "classes", "feature_norm_bound")
    }
    data.write(tmp_path / "out", train, test, info)
    assert data.load(tmp_path / "out").x_test.shape == (5, 2, 3, 3)


def test_planning_reads_the_file_again_once_it_changed_and_load_refuses_a_claimed_bound(tmp_path):
    """expected_info reads a source once per content stamp (size, mtime): a changed file is read
    again. An arrays dataset guarantees no feature-norm bound: an info.json
    claiming one is refused."""
    path = _npz(tmp_path / "d.npz", x_train=np.eye(10), y_train=np.arange(10) % 2)
    cfg = data.resolve_dataset({"kind": "arrays", "path": path}, "own")
    assert data.expected_info(cfg, "own")["train_size"] == 8
    _npz(tmp_path / "d.npz", x_train=np.eye(20), y_train=np.arange(20) % 2)
    assert data.expected_info(cfg, "own")["train_size"] == 16
    data.write(tmp_path / "out", *data.prepare(cfg, "own"))
    info = json.loads((tmp_path / "out" / "info.json").read_text())
    (tmp_path / "out" / "info.json").write_text(json.dumps({**info, "feature_norm_bound": 1.0}))
    with pytest.raises(DPLabError, match="guarantees no bound: the file was edited"):
        data.load(tmp_path / "out")


def test_arrays_without_a_test_split_are_split_stratified_and_seeded(tmp_path):
    y = np.repeat([0, 1, 2, 3], [40, 20, 20, 20])
    path = _npz(tmp_path / "d.npz", x_train=np.arange(100.0)[:, None], y_train=y)
    train, test, _ = _prepare({"kind": "arrays", "path": path, "seed": 3})
    assert len(test["y"]) == 20 and np.bincount(test["y"]).tolist() == [
        8,
        4,
        4,
        4,
    ]  # 0.2 of each class
    assert sorted(np.concatenate([train["x"], test["x"]])[:, 0]) == list(
        range(100)
    )  # every record once
    assert np.array_equal(y[train["x"][:, 0].astype(int)], train["y"])  # records keep their labels
    again = _prepare({"kind": "arrays", "path": path, "seed": 3})[1]
    other = _prepare({"kind": "arrays", "path": path, "seed": 4, "test_fraction": 0.5})[1]
    assert np.array_equal(again["x"], test["x"]) and len(other["y"]) == 50


CSV = """age,city,score,code,y
30,paris,1.5,1,no
40,rome,2.5,2,yes
50,paris,2.5,1,no
20,oslo,2.5,3,yes
35,rome,2.5,2,no
45,paris,2.5,1,yes
25,rome,2.5,2,no
55,oslo,2.5,3,yes
"""


def test_csv_encoding_is_scikit_learns_fitted_on_the_training_split(tmp_path):
    """The split is scikit-learn's seeded stratified train_test_split of the rows; numeric columns
    then StandardScaler (a constant one only centred), categorical ones and those listed under
    categorical OneHotEncoder(handle_unknown='ignore') with sorted categories, both fitted on the
    training rows only."""
    import pandas as pd
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    (tmp_path / "t.csv").write_text(CSV)
    entry = {
        "kind": "csv",
        "path": str(tmp_path / "t.csv"),
        "label": "y",
        "categorical": ["code"],
        "test_fraction": 0.5,
        "seed": 1,
    }
    train, test, info = _prepare(entry)
    frame = pd.read_csv(tmp_path / "t.csv", dtype=str)
    y = (frame["y"] == "yes").to_numpy().astype(np.int64)
    rows_train, rows_test = train_test_split(
        np.arange(8), test_size=0.5, stratify=y, random_state=1
    )
    fit = frame.iloc[rows_train]
    scale = StandardScaler().fit(fit[["age", "score"]].astype(float))
    onehot = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(fit[["city", "code"]])
    cities, codes = (
        [f"{col}={c}" for c in cats] for col, cats in zip(("city", "code"), onehot.categories_)
    )
    assert info["features"] == ["age", *cities, "score", *codes] and info["class_names"] == [
        "no",
        "yes",
    ]
    for rows, split in ((rows_train, train), (rows_test, test)):
        part = frame.iloc[rows]
        numeric = scale.transform(
            part[["age", "score"]].astype(float)
        )  # sklearn divides by 1 where std is 0
        hot = onehot.transform(part[["city", "code"]])
        expected = np.column_stack(
            [numeric[:, 0], hot[:, : len(cities)], numeric[:, 1], hot[:, len(cities) :]]
        )
        np.testing.assert_allclose(split["x"], expected, atol=1e-6)
        assert np.array_equal(split["y"], y[rows])
    # seed 1 puts both edge cases in: score constant on the training rows, oslo in test rows only
    assert info["encoding"]["score"] == {"mean": 2.5, "std": 0.0} and "city=oslo" not in cities
    assert "oslo" in frame.iloc[rows_test]["city"].tolist()


def test_csv_classes_sort_as_integers_where_every_label_is_one(tmp_path):
    labels = ["2"] * 3 + ["9"] * 4 + ["10"] * 5
    (tmp_path / "t.csv").write_text(
        "f,label\n" + "".join(f"{i},{v}\n" for i, v in enumerate(labels))
    )
    train, test, info = _prepare(
        {"kind": "csv", "path": str(tmp_path / "t.csv"), "label": "label", "test_fraction": 0.25}
    )
    assert info["class_names"] == ["2", "9", "10"]  # as integers ("10" < "2" as text)
    assert np.bincount(np.concatenate([train["y"], test["y"]])).tolist() == [3, 4, 5]
    (tmp_path / "t.csv").write_text(
        "f,label\n" + "".join(f"{i},{v}x\n" for i, v in enumerate(labels))
    )
    assert _prepare({"kind": "csv", "path": str(tmp_path / "t.csv"), "label": "label"})[2][
        "class_names"
    ] == ["10x", "2x", "9x"]  # as text where one label is no integer


def _neighbours(tmp_path) -> tuple[str, str]:
    """A table of 20 records (id, age, region, y) and the same with one more, an extreme age in a
    region no other record has."""
    rows = [f"{i},{20 + 3 * i},{'ns'[i % 2]},{'ab'[i % 3 % 2]}" for i in range(20)]
    small, large = tmp_path / "small.csv", tmp_path / "large.csv"
    small.write_text("id,age,region,y\n" + "\n".join(rows) + "\n")
    large.write_text(small.read_text() + "20,1000000,rare_town,b\n")
    return str(small), str(large)


def test_csv_encoding_given_makes_a_records_features_its_own(tmp_path):
    """With ``encoding`` given for every column, each record is encoded from the given values
    alone: two neighbouring files (one more record, with an extreme age and a new region) give the
    common records the same features and the same input shape; nothing is fitted."""
    given = {
        "id": {"mean": 0, "std": 1},
        "age": {"mean": 40, "std": 10},
        "region": {"categories": ["s", "n"]},
    }
    for path in _neighbours(tmp_path):
        entry = {"kind": "csv", "path": path, "label": "y", "encoding": given, "seed": 2}
        train, test, info = _prepare(entry)
        assert info["input_shape"] == [4] and info["fitted"] == []
        assert info["features"] == ["id", "age", "region=n", "region=s"]
        x = np.concatenate([train["x"], test["x"]])
        x = x[np.argsort(x[:, 0])]  # by id
        ids = np.arange(20)
        expected = np.column_stack([ids, (20 + 3 * ids - 40) / 10, ids % 2 == 0, ids % 2 == 1])
        np.testing.assert_allclose(x[:20], expected, rtol=1e-6)
        if len(x) == 21:  # the extra record: its region is no listed category
            assert x[20].tolist() == [20, (1e6 - 40) / 10, 0, 0]


def test_csv_columns_fitted_on_the_data_are_listed_and_noted(tmp_path, capsys):
    """info.json's ``fitted`` lists the columns encoded from the training split, and prepare-data
    prints one note naming them."""
    small = _neighbours(tmp_path)[0]
    entry = {"kind": "csv", "path": small, "label": "y", "encoding": {"id": {"mean": 0, "std": 1}}}
    out = tmp_path / "out"
    assert main(["prepare-data", "--dataset-json", json.dumps(entry), "--out", str(out)]) == 0
    info = json.loads((out / "info.json").read_text())
    assert info["fitted"] == ["age", "region"] and info["encoding"]["id"] == {"mean": 0, "std": 1}
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "encoding of age, region was fitted" in notes[0], notes
    assert "datasets.dataset.encoding" in notes[0]


@pytest.mark.parametrize("split", ["train", "test"])
def test_csv_values_too_large_to_encode_are_refused(split, tmp_path, capsys):
    """A value that overflows the fitted mean or std (float64: 1e308 in the training split), or
    its feature once cast to float32 (1e200 in the test split), is one error naming its line."""
    from sklearn.model_selection import train_test_split

    y = np.arange(10) % 2
    rows_train, rows_test = train_test_split(
        np.arange(10), test_size=0.2, stratify=y, random_state=0
    )
    a = [str(i) for i in range(10)]
    row, a[row] = (rows_train[3], "1e308") if split == "train" else (rows_test[0], "1e200")
    (tmp_path / "t.csv").write_text("a,y\n" + "".join(f"{v},{c}\n" for v, c in zip(a, y)))
    entry = {"kind": "csv", "path": str(tmp_path / "t.csv"), "label": "y"}
    out = tmp_path / "out"
    code = main(["prepare-data", "--dataset-json", json.dumps(entry), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and len(err.splitlines()) == 1, err
    assert f"datasets.dataset.path: {tmp_path / 't.csv'} line {row + 2}: column 'a' holds" in err
    words = "in float64" if split == "train" else "into float32"
    assert f"{a[row]!r}" in err and f"too large to standardise {words}" in err, err


@pytest.mark.parametrize(
    "spec, key, words",
    [
        ({"mean": 0, "std": 0}, "a.std", "0 is less than or equal to the minimum of 0"),
        ({"mean": 10**400, "std": 1}, "a.mean", "is greater than the maximum of 1e+308"),
        ({"categories": []}, "a.categories", "[]"),
        ({"categories": ["x", "x"]}, "a.categories", "has non-unique elements"),
        ({"categories": [1]}, "a.categories[0]", "1 is not of type 'string'"),
        ({"mean": 0, "std": 1, "scale": 2}, "a.scale", "unknown key"),
    ],
)
def test_csv_encoding_values_are_checked(spec, key, words, tmp_path, capsys):
    """An encoding's values outside their range are one line naming their key, exit code 2."""
    (tmp_path / "t.csv").write_text("a,y\n1,0\n2,1\n")
    entry = {"kind": "csv", "path": str(tmp_path / "t.csv"), "label": "y", "encoding": {"a": spec}}
    code = main(["prepare-data", "--dataset-json", json.dumps(entry), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"datasets.dataset.encoding.{key}: " in err and words in err, err


def test_image_folder_reads_pixels_classes_and_the_test_folder(tmp_path):
    pixels = _images(
        tmp_path / "img",
        {"train": {"b": 2, "a": 3}, "test": {"a": 1, "b": 1}},
        size=(4, 3),
        mode="RGB",
    )
    entry = {"kind": "image_folder", "path": str(tmp_path / "img"), "size": [3, 4], "channels": 3}
    train, test, info = _prepare(entry)
    assert info["class_names"] == ["a", "b"] and train["y"].tolist() == [0, 0, 0, 1, 1]
    assert info["input_shape"] == [3, 3, 4] and info["feature_norm_bound"] == pytest.approx(
        6.0
    )  # √(3·3·4)
    np.testing.assert_array_equal(
        train["x"][3], pixels[("train", "b", 0)].transpose(2, 0, 1) / np.float32(255)
    )
    np.testing.assert_array_equal(
        test["x"][1], pixels[("test", "b", 0)].transpose(2, 0, 1) / np.float32(255)
    )
    cfg = data.resolve_dataset(entry, "own")
    assert data.expected_info(cfg, "own") == {
        k: info[k] for k in ("train_size", "input_shape", "classes", "feature_norm_bound")
    }
    data.write(tmp_path / "out", train, test, info)
    assert data.load(tmp_path / "out").info["class_names"] == ["a", "b"]


def test_image_folder_resizes_and_converts_only_when_asked(tmp_path):
    _images(tmp_path / "img", {"train": {"a": 3, "b": 3}}, size=(5, 5), mode="RGB")
    entry = {"kind": "image_folder", "path": str(tmp_path / "img"), "size": [4, 4], "channels": 1}
    with pytest.raises(DPLabError, match="is a RGB image.*convert: true"):
        _prepare(entry)
    with pytest.raises(
        DPLabError, match=r"is 5×5 \(height×width\), but size is \[4, 4\].*resize: true"
    ):
        _prepare({**entry, "convert": True})
    train, test, info = _prepare({**entry, "convert": True, "resize": True})
    first = (
        Image.open(sorted((tmp_path / "img" / "train" / "a").iterdir())[0])
        .convert("L")
        .resize((4, 4), Image.Resampling.BILINEAR)
    )
    assert len(train["y"]) + len(test["y"]) == 6 and train["x"].shape[1:] == (1, 4, 4)
    assert any(
        np.array_equal(x[0], np.asarray(first) / np.float32(255)) for x in [*train["x"], *test["x"]]
    )


def test_image_folder_follows_linked_folders(tmp_path):
    """Images below a symbolic link to a folder are read, as ImageFolder's os.walk(followlinks)
    reads them, in sorted path order; they are the data job's inputs too."""
    pixels = _images(tmp_path / "img", {"train": {"a": 2, "b": 2}, "test": {"a": 1, "b": 1}})
    linked = _images(tmp_path / "elsewhere", {"x": {"sub": 3}}, seed=1)
    (tmp_path / "img" / "train" / "b" / "linked").symlink_to(tmp_path / "elsewhere" / "x" / "sub")
    (tmp_path / "img" / "train" / "c").symlink_to(tmp_path / "img" / "test" / "a")
    entry = {"kind": "image_folder", "path": str(tmp_path / "img"), "size": [3, 4], "channels": 1}
    train, _, info = _prepare(entry)
    assert info["class_names"] == ["a", "b", "c"]
    assert train["y"].tolist() == [0, 0, 1, 1, 1, 1, 1, 2]
    for row, image in ((2, pixels[("train", "b", 0)]), (4, linked[("x", "sub", 0)])):
        np.testing.assert_array_equal(train["x"][row, 0], image / np.float32(255))
    np.testing.assert_array_equal(train["x"][7, 0], pixels[("test", "a", 0)] / np.float32(255))
    assert str(tmp_path / "img" / "train" / "b" / "linked" / "2.png") in data.source_files(
        data.resolve_dataset(entry, "own"), "own"
    )


_X, _Y = np.zeros((6, 2)), np.array([0, 1] * 3)
#: bad .npz files: name -> (arrays, words of the message naming datasets.own.path)
NPZ = {
    "NaN": (dict(x_train=np.where(np.eye(6, 2) > 0, np.nan, _X), y_train=_Y), "NaN or inf"),
    "inf as float32": (dict(x_train=_X + [[0, 1e39]], y_train=_Y), "NaN or inf"),
    "x/y length mismatch": (dict(x_train=_X, y_train=_Y[:5]), "one label per record"),
    "object array": (dict(x_train=_X.astype(object), y_train=_Y), "object array"),
    "string features": (dict(x_train=np.array([["a", "b"]] * 6), y_train=_Y), "must be numeric"),
    "float labels": (dict(x_train=_X, y_train=_Y.astype(float)), "integer class labels"),
    "a single class": (dict(x_train=_X, y_train=0 * _Y), "one class"),
    "a negative label": (dict(x_train=_X, y_train=_Y - 1), "label -1"),
    "a class with no record": (dict(x_train=_X, y_train=2 * _Y), "no record of class 1"),
    "a test label outside the training labels": (
        dict(x_train=_X, y_train=_Y, x_test=_X[:2], y_test=np.array([0, 2])),
        "y_test holds label 2",
    ),
    "no y_train": (dict(x_train=_X), "holds no y_train"),
    "an unknown array": (dict(x_train=_X, y_train=_Y, X_test=_X), "unknown array 'X_test'"),
    "x_test of another shape": (
        dict(x_train=_X, y_train=_Y, x_test=np.zeros((2, 3)), y_test=_Y[:2]),
        "feature shape",
    ),
}
#: bad CSV files: name -> (text, entry keys, the key named, words of the message)
TABLES = {
    "a missing label column": ("a,b\n1,2\n", {"label": "y"}, "label", "no column 'y'"),
    "a missing feature column": (
        "a,y\n1,0\n2,1\n",
        {"label": "y", "features": ["a", "z"]},
        "features",
        "no column 'z'",
    ),
    "an empty cell": ("a,y\n1,0\n,1\n", {"label": "y"}, "path", "line 3: column 'a' is empty"),
    "an NA marker among numbers": (
        "a,y\n1,0\nNA,1\n2,0\n",
        {"label": "y"},
        "path",
        "mixes numbers",
    ),
    "nan": ("a,y\n1,0\nnan,1\n", {"label": "y"}, "path", "NaN and inf"),
    "inf": ("a,y\n1,0\n-inf,1\n", {"label": "y"}, "path", "NaN and inf"),
    "a single class": ("a,y\n1,0\n2,0\n", {"label": "y"}, "label", "one class"),
    "a ragged row": ("a,y\n1,0\n2\n", {"label": "y"}, "path", "line 3 has 1 cells"),
    "a column named twice": ("a,a,y\n1,2,0\n", {"label": "y"}, "path", "the column 'a' twice"),
    "the label among the features": (
        "a,y\n1,0\n",
        {"label": "y", "features": ["a", "y"]},
        "features",
        "label column",
    ),
    "categorical not a feature": (
        "a,b,y\n1,2,0\n",
        {"label": "y", "features": ["a"], "categorical": ["b"]},
        "categorical",
        "not a feature column",
    ),
    "a header only": ("a,y\n", {"label": "y"}, "path", "no record"),
    "only the label column": ("y\n0\n1\n", {"label": "y"}, "path", "no column besides the label"),
    "an encoding of no feature column": (
        "a,b,y\n1,x,0\n2,z,1\n",
        {"label": "y", "features": ["a"], "encoding": {"b": {"categories": ["x"]}}},
        "encoding.b",
        "not a feature column",
    ),
    "a mean without a std": (
        "a,y\n1,0\n2,1\n",
        {"label": "y", "encoding": {"a": {"mean": 1}}},
        "encoding.a",
        "give {mean: m, std: s}",
    ),
    "a mean and std of a text column": (
        "a,y\nx,0\nz,1\n",
        {"label": "y", "encoding": {"a": {"mean": 0, "std": 1}}},
        "encoding.a",
        "a categorical column",
    ),
    "a mean and std of a column listed as categorical": (
        "a,y\n1,0\n2,1\n",
        {"label": "y", "categorical": ["a"], "encoding": {"a": {"mean": 0, "std": 1}}},
        "encoding.a",
        "give its categories",
    ),
    "categories of a numeric column": (
        "a,y\n1,0\n2,1\n",
        {"label": "y", "encoding": {"a": {"categories": ["1"]}}},
        "encoding.a",
        "list it under categorical",
    ),
    "a value beyond float32 once encoded": (
        "a,y\n" + "".join(f"{v},{i % 2}\n" for i, v in enumerate([*range(9), "1e30"])),
        {"label": "y", "encoding": {"a": {"mean": 0, "std": 1e-10}}},
        "path",
        "line 11: column 'a' holds '1e30', too large to standardise into float32",
    ),
}
#: bad image folders (size [3, 4], channels 1): name -> (layout, image size (w, h), mode, words)
FOLDERS = {
    "an image of another size": ({"train": {"a": 2, "b": 2}}, (5, 3), "L", "is 3×5"),
    "an image of another mode": ({"train": {"a": 2, "b": 2}}, (4, 3), "RGB", "is a RGB image"),
    "an empty class folder": ({"train": {"a": 2, "b": 0}}, (4, 3), "L", "holds no image"),
    "a test class not in train": (
        {"train": {"a": 2, "b": 2}, "test": {"c": 1}},
        (4, 3),
        "L",
        "test class with no training folder",
    ),
    "a single class": ({"train": {"a": 3}}, (4, 3), "L", "holds one class"),
}
OTHER = (
    "arrays: test_fraction beside a test split",
    "arrays: a class of one record to split",
    "arrays: missing file",
    "arrays: not an npz",
    "image_folder: a file that is no image",
    "image_folder: an unreadable image",
    "image_folder: missing folder",
    "image_folder: a broken link in a class folder",
    "image_folder: a broken link in train/",
    "image_folder: a link back to a folder above",
    "image_folder: a FIFO",
    "image_folder: a class folder linked to another",
    "image_folder: a hard link to an image of another class",
)
BAD = [
    *(f"arrays: {n}" for n in NPZ),
    *(f"csv: {n}" for n in TABLES),
    *(f"image_folder: {n}" for n in FOLDERS),
    *OTHER,
]


def _bad(tmp_path) -> dict[str, tuple[dict, str, str]]:
    """Every case of :data:`BAD`: name -> (dataset entry, key named, words of the message), its
    files written under tmp_path."""
    cases = {}
    for i, (name, (arrays, words)) in enumerate(NPZ.items()):
        np.savez(tmp_path / f"{i}.npz", **arrays)
        cases[f"arrays: {name}"] = (
            {"kind": "arrays", "path": str(tmp_path / f"{i}.npz")},
            "path",
            words,
        )
    np.savez(tmp_path / "split.npz", x_train=_X, y_train=_Y, x_test=_X, y_test=_Y)
    cases[OTHER[0]] = (
        {"kind": "arrays", "path": str(tmp_path / "split.npz"), "test_fraction": 0.3},
        "test_fraction",
        "own test split",
    )
    np.savez(tmp_path / "single.npz", x_train=_X, y_train=np.array([0, 0, 0, 0, 0, 1]))
    cases[OTHER[1]] = (
        {"kind": "arrays", "path": str(tmp_path / "single.npz")},
        "test_fraction",
        "stratified split",
    )
    cases[OTHER[2]] = (
        {"kind": "arrays", "path": str(tmp_path / "none.npz")},
        "path",
        "no such file",
    )
    (tmp_path / "notzip.npz").write_text("hello")
    cases[OTHER[3]] = (
        {"kind": "arrays", "path": str(tmp_path / "notzip.npz")},
        "path",
        "not a readable .npz",
    )
    for i, (name, (text, keys, key, words)) in enumerate(TABLES.items()):
        (tmp_path / f"{i}.csv").write_text(text)
        cases[f"csv: {name}"] = (
            {"kind": "csv", "path": str(tmp_path / f"{i}.csv"), **keys},
            key,
            words,
        )
    folder = {"kind": "image_folder", "size": [3, 4], "channels": 1}
    for i, (name, (layout, size, mode, words)) in enumerate(FOLDERS.items()):
        _images(tmp_path / f"img{i}", layout, size=size, mode=mode)
        cases[f"image_folder: {name}"] = (
            {**folder, "path": str(tmp_path / f"img{i}")},
            "path",
            words,
        )
    _images(tmp_path / "stray", {"train": {"a": 2, "b": 2}})
    (tmp_path / "stray" / "train" / "a" / "notes.txt").write_text("x")
    cases[OTHER[4]] = ({**folder, "path": str(tmp_path / "stray")}, "path", "not an image file")
    for cls in "ab":
        (tmp_path / "broken" / "train" / cls).mkdir(parents=True)
        (tmp_path / "broken" / "train" / cls / "0.png").write_bytes(b"\x89PNG not really")
    cases[OTHER[5]] = (
        {**folder, "path": str(tmp_path / "broken")},
        "path",
        "cannot be read as an image",
    )
    cases[OTHER[6]] = ({**folder, "path": str(tmp_path / "none")}, "path", "no such folder")
    odd = {  # a name below tmp_path/odd<i>/train -> what it becomes, the words of the message
        "a/z.png": (lambda p: p.symlink_to(tmp_path / "gone.png"), "a/z.png is a broken symbolic"),
        "c": (lambda p: p.symlink_to(tmp_path / "gone"), "train/c is a broken symbolic link"),
        "a/sub": (lambda p: p.symlink_to(p.parent.parent), "a/sub leads back to"),
        "a/f.png": (lambda p: os.mkfifo(p), "a/f.png is neither a file nor a folder"),
        # one image as two records: ε covers a record (a path), not an image
        "d": (lambda p: p.symlink_to(p.parent / "a"), "(class 'd') are one file"),
        "b/z.png": (lambda p: os.link(p.parent.parent / "a" / "0.png", p), "are one file"),
    }
    for i, (name, (make, words)) in enumerate(odd.items(), start=7):
        _images(tmp_path / f"odd{i}", {"train": {"a": 2, "b": 2}})
        make(tmp_path / f"odd{i}" / "train" / name)
        cases[OTHER[i]] = ({**folder, "path": str(tmp_path / f"odd{i}")}, "path", words)
    return {
        name: (entry, f"datasets.own.{key}", words) for name, (entry, key, words) in cases.items()
    }


@pytest.fixture(scope="module")
def bad_cases(tmp_path_factory):
    cases = _bad(tmp_path_factory.mktemp("bad_own_data"))
    assert sorted(cases) == sorted(BAD)
    return cases


@pytest.mark.parametrize("name", BAD)
def test_a_bad_input_is_one_line_naming_its_key_in_prepare_data_and_in_planning(
    name, bad_cases, tmp_path, capsys
):
    """prepare-data exits 2 with one line naming the key and writes nothing; planning
    (check_config, before any job) refuses it with the same line."""
    entry, key, words = bad_cases[name]
    out = tmp_path / "out"
    code = main(
        ["prepare-data", "--dataset-json", json.dumps(entry), "--dataset", "own", "--out", str(out)]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists(), err
    assert len(err.splitlines()) == 1 and f"{key}: " in err and words in err, err
    config = validate(
        {
            "datasets": {"own": entry},
            "runs": {"r": {"method": "sgd", "dataset": "own", "steps": 1, "batch_size": 1}},
        }
    )
    with pytest.raises(DPLabError) as caught:
        jobs.plan(config)
    assert str(caught.value) == err.split("error: ", 1)[1]


def test_the_data_files_are_inputs_of_the_data_job_and_of_provenance(tmp_path, monkeypatch):
    """The data job's inputs are the file (every image of a folder: Snakemake's and DVC's, one job
    list, tests/test_jobs.py); the provenance job's too, and its record holds their SHA-256."""
    monkeypatch.chdir(tmp_path)
    np.savez(
        tmp_path / "d.npz",
        x_train=np.eye(4),
        y_train=np.array([0, 1, 0, 1]),
        x_test=np.eye(4)[:2],
        y_test=np.array([0, 1]),
    )
    _images(tmp_path / "img", {"train": {"a": 2, "b": 2}, "test": {"a": 1}})
    config = validate(
        {
            "datasets": {
                "arr": {"kind": "arrays", "path": "d.npz"},
                "img": {"kind": "image_folder", "path": "img", "size": [3, 4], "channels": 1},
            },
            "runs": {"r": {"method": "sgd", "dataset": "arr", "steps": 1, "batch_size": 1}},
        }
    )
    plan = jobs.plan(config)
    images = [*(f"img/train/{c}/{i}.png" for c in "ab" for i in range(2)), "img/test/a/0.png"]
    assert plan.job("prepare_data", "arr").inputs == {"data": ["d.npz"]}
    assert plan.job("prepare_data", "img").inputs == {"data": images}
    assert plan.job("provenance").inputs["data"] == ["d.npz", *images]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x").write_text("1")
    assert (
        main(["provenance", "--config-json", json.dumps(config), "--out", "p.json", "results/x"])
        == 0
    )
    record = json.loads((tmp_path / "p.json").read_text())
    assert (
        record["inputs"]["d.npz"]["sha256"]
        == hashlib.sha256((tmp_path / "d.npz").read_bytes()).hexdigest()
    )
    assert set(record["inputs"]) == {"d.npz", *images}


def test_the_worked_example_table_is_what_its_script_makes(tmp_path):
    """config/examples/data/loans.csv is the seeded script's output, byte for byte, and small."""
    shipped = ROOT / "config" / "examples" / "data" / "loans.csv"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "config" / "examples" / "make_data.py"),
            "table",
            str(tmp_path / "loans.csv"),
        ],
        check=True,
        timeout=120,
    )
    assert (
        tmp_path / "loans.csv"
    ).read_bytes() == shipped.read_bytes() and shipped.stat().st_size < 200_000
    entry = yaml.safe_load((ROOT / "config" / "examples" / "own_data.yaml").read_text())[
        "datasets"
    ]["loans"]
    train, test, info = _prepare({**entry, "path": str(shipped)}, "loans")
    assert (info["train_size"], info["test_size"], info["class_names"]) == (900, 300, ["no", "yes"])
    assert info["features"][:3] == ["age", "income", "debt_ratio"] and train["x"].shape == (900, 11)


@pytest.mark.pipeline
def test_snakemake_reruns_the_data_job_when_the_data_file_changes(tmp_path):
    """A project folder with a CSV and a config: after the data job ran, Snakemake has nothing to
    do; after the CSV changed it reruns the data job, because the file is its input."""
    from conftest import run

    (tmp_path / "t.csv").write_text(
        "a,b,y\n" + "".join(f"{i},{'uv'[i % 2]},{i % 3}\n" for i in range(30))
    )
    config = {
        "datasets": {"own": {"kind": "csv", "path": "t.csv", "label": "y"}},
        "runs": {"r": {"method": "sgd", "dataset": "own", "steps": 1, "batch_size": 1}},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    smk = [
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "c.yaml"),
        "--cores",
        "1",
        "results/data/own/info.json",
    ]
    run(smk, cwd=tmp_path)
    assert "Nothing to be done" in run([*smk, "--dry-run"], cwd=tmp_path).stdout
    with open(tmp_path / "t.csv", "a") as handle:
        handle.write("30,u,0\n")
    plan = run([*smk, "--dry-run"], cwd=tmp_path)
    assert "rule prepare_data:" in plan.stdout and "t.csv" in plan.stdout, plan.stdout
