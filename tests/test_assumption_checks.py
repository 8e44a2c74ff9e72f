"""Assumptions checked everywhere they apply: clipping and weight decay for the
gradient-map bounds, accountant names at resolve time, loss constants against the data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from dplab.training.settings import RunSettings
from dplab.accounting import Setting, get
from dplab.cli import main
from dplab.errors import AssumptionError, DPLabError
from dplab.training import data
from dplab.training.resolve import resolve_run
from dplab.training.privacy import loss_constants

SETTINGS = {
    "ye_shokri": dict(
        sampling="without_replacement", batch_size=50, strong_convexity=1.0, lipschitz=1.0
    ),
    "langevin": dict(sampling="full_batch", strong_convexity=1.0, lipschitz=1.0),
    "pabi": dict(sampling="shuffle", batch_size=50, lipschitz=1.0),
}


def _setting(name, **kw):
    base = dict(
        noise_multiplier=2.0,
        steps=100,
        neighbouring="replace_one",
        dataset_size=1000,
        lr=0.1,
        smoothness=4.0,
        clip=1.0,
    )
    return Setting(**{**base, **SETTINGS[name], **kw})


@pytest.mark.parametrize("name", sorted(SETTINGS))
@pytest.mark.parametrize(
    "change,key", [(dict(lipschitz=5.0), "clip"), (dict(regularization=0.1), "regularization")]
)
def test_gradient_map_bounds_refuse_active_clipping_and_weight_decay(name, change, key):
    """Their theorems bound the loss's own gradient step: clipping below L changes the gradient
    field, weight decay changes the map (001 eq. 17 is not in 000 §VI–VII or 002)."""
    assert get(name).epsilon(_setting(name), 1e-5) > 0
    with pytest.raises(AssumptionError) as err:
        get(name).epsilon(_setting(name, **change), 1e-5)
    assert err.value.key == key


def test_cli_ye_shokri_refuses_clip_below_lipschitz(capsys):
    args = [
        "epsilon",
        "--accountant",
        "ye_shokri",
        "--delta",
        "1e-5",
        "--noise-multiplier",
        "2",
        "--steps",
        "100",
        "--sampling",
        "without_replacement",
        "--neighbouring",
        "replace_one",
        "--batch-size",
        "50",
        "--dataset-size",
        "1000",
        "--lr",
        "0.1",
        "--strong-convexity",
        "1",
        "--smoothness",
        "4",
        "--clip",
        "1",
    ]
    assert main([*args, "--lipschitz", "1"]) == 0
    capsys.readouterr()
    assert main([*args, "--lipschitz", "5"]) == 2
    assert "error: clip: must be >= lipschitz (5.0)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name,extra",
    [
        (
            "ye_shokri",
            ["--sampling", "without_replacement", "--batch-size", "50", "--strong-convexity", "1"],
        ),
        ("langevin", ["--sampling", "full_batch", "--strong-convexity", "1"]),
        (
            "pabi",
            ["--sampling", "shuffle", "--batch-size", "50"],
        ),  # convex: reads no strong convexity (refused)
    ],
)
def test_cli_gradient_map_bounds_refuse_a_missing_lipschitz(name, extra, capsys):
    """Without L nothing says clipping is inactive, and the bounds analyse the loss's own gradient
    step: exit 2 naming --lipschitz, no ε (langevin and ye_shokri printed one before)."""
    args = [
        "epsilon",
        "--accountant",
        name,
        "--delta",
        "1e-5",
        "--noise-multiplier",
        "2",
        "--steps",
        "100",
        "--neighbouring",
        "replace_one",
        "--dataset-size",
        "1000",
        "--lr",
        "0.1",
        "--smoothness",
        "4",
        "--clip",
        "1",
        *extra,
    ]
    assert main([*args, "--lipschitz", "1"]) == 0
    capsys.readouterr()
    assert main(args) == 2
    captured = capsys.readouterr()
    assert (
        captured.out == ""
        and "error: lipschitz: is required" in captured.err
        and "--lipschitz" in captured.err
    )


@pytest.mark.parametrize(
    "run,key",
    [
        ({"accountant": "nosuch", "noise_multiplier": 1.0}, "accountant"),
        ({"accountants": ["rdp", "nosuch"], "noise_multiplier": 1.0}, "accountants"),
        ({"accountant": "mf", "noise_multiplier": 1.0}, "accountant"),
    ],
)
def test_unknown_accountants_are_refused_at_resolve_time(run, key):
    with pytest.raises(DPLabError) as err:
        resolve_run({"method": "dp_sgd", **run})
    assert err.value.key == key and (
        "valid: advanced" in str(err.value) or "dp_mf" in str(err.value)
    )


def test_pipeline_config_refuses_an_unknown_accountant(tmp_path):
    from conftest import ROOT

    from dplab.config import load_config

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["runs"]["dp_sgd"]["accountant"] = "nosuch"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(DPLabError, match="runs.dp_sgd.accountant: unknown accountant 'nosuch'"):
        load_config(path)


@pytest.fixture
def prepared(tmp_path):
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 200, "test_size": 20, "dim": 4, "feature_norm": 1.0},
        "synthetic",
    )
    folder = tmp_path / "data"
    data.write(folder, *data.prepare(cfg, "synthetic"))
    return folder


def _edit_info(folder, **changes):
    info = json.loads((folder / "info.json").read_text())
    for key, value in changes.items():
        info[key] = value
    (folder / "info.json").write_text(json.dumps(info))


#: noisy GD whose true constants (R = 1: β = (R² + 1)/2 + l2 = 1.05) exclude langevin (η = 0.97 ≥
#: 1/β = 0.952), and which an edited β = 0.55 would let through
NOISY_GD = {
    "method": "noisy_gd",
    "dataset": "synthetic",
    "l2": 0.05,
    "diameter": 4.0,
    "clip": 3.0,
    "lr": 0.97,
    "noise_multiplier": 20.0,
    "steps": 20,
    "log_every": 20,
    "neighbouring": "replace_one",
    "accountants": ["langevin", "rdp"],
}


def test_true_constants_exclude_langevin(prepared, tmp_path):
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(NOISY_GD),
                "--data",
                str(prepared),
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (
        "langevin" not in summary["epsilon"] and "lr" in summary["excluded_accountants"]["langevin"]
    )


@pytest.mark.parametrize(
    "edit",
    [
        {
            "logreg_constants": {"lipschitz": 2.0, "smoothness": 0.5}
        },  # β edited down: langevin would pass
        {
            "feature_norm_bound": 0.5,
            "logreg_constants": data.logreg_constants(0.5),
        },  # R and constants edited together
    ],
)
def test_edited_info_json_is_refused_naming_the_file(prepared, tmp_path, capsys, edit):
    _edit_info(prepared, **edit)
    out = tmp_path / "r"
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(NOISY_GD),
                "--data",
                str(prepared),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert str(prepared / "info.json") in err and "edited" in err and not out.exists()


def test_data_beyond_the_recorded_bound_is_refused(prepared):
    arrays = dict(np.load(prepared / "train.npz"))
    arrays["x"][3] *= 5.0  # a record of norm up to 5 > R = 1
    np.savez(prepared / "train.npz", **arrays)
    with pytest.raises(DPLabError, match="info.json: the training data hold a record with"):
        data.load(prepared)


def test_records_beyond_the_bound_void_the_loss_constants(prepared):
    """The records a run trains on (e.g. an audit's canary of norm 16 on digits, R = 8) must lie
    within R, or the constants do not hold for them."""
    dataset = data.load(prepared)
    cfg = resolve_run({**NOISY_GD, "lr": 0.1})
    consts, _ = loss_constants(RunSettings.of(cfg), dataset.info, dataset.x_train)
    assert consts["smoothness"] == pytest.approx((1 + 1) / 2 + 0.05)
    canary = dataset.x_train.clone()
    canary[0] *= 3.0 / float(canary[0].norm())
    consts, why = loss_constants(RunSettings.of(cfg), dataset.info, canary)
    assert consts == {} and "||x|| = 3 > R = 1" in why


def test_a_nan_record_lies_beyond_every_bound(prepared):
    """NaN fails ||x|| ≤ R, which a check ||x|| > R would let pass: load refuses it, the loss
    constants are void, and largest_norm finds it past its first chunk of 4096 records too."""
    x = np.zeros((5000, 2))
    x[4500, 0] = np.nan
    assert np.isnan(data.largest_norm(x))
    dataset = data.load(prepared)
    canary = dataset.x_train.clone()
    canary[0, 0] = float("nan")
    cfg = resolve_run({**NOISY_GD, "lr": 0.1})
    consts, why = loss_constants(RunSettings.of(cfg), dataset.info, canary)
    assert consts == {} and "||x|| = nan > R = 1" in why
    arrays = dict(np.load(prepared / "train.npz"))
    arrays["x"][3, 0] = np.nan
    np.savez(prepared / "train.npz", **arrays)
    with pytest.raises(DPLabError, match=r"a record with \|\|x\|\| = nan > feature_norm_bound"):
        data.load(prepared)


def test_asoodeh_regularized_refuses_a_projection():
    """001 Thm 3 analyses the unprojected update (eq. 16); its Π_t (eq. 19) is
    a device of the proof."""
    s = Setting(
        noise_multiplier=500.0,
        steps=10,
        sampling="without_replacement",
        neighbouring="replace_one",
        batch_size=10,
        dataset_size=10000,
        clip=1.0,
        lr=0.1,
        regularization=0.65,
        dimension=10,
    )
    assert get("asoodeh_regularized").delta(s, 5.0) < 1
    with pytest.raises(AssumptionError) as err:
        get("asoodeh_regularized").delta(s.replace(diameter=2.0), 5.0)
    assert err.value.key == "diameter"
