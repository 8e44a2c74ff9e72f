"""A corrupt or truncated input (a prepared dataset's files, a saved factorization, a run's
summary.json) stops the command that reads it with one line naming the file and the command that
writes it again, exit 2, nothing written (dplab.inputs)."""

import json
import shutil

import numpy as np
import pytest
import torch
import yaml

from conftest import ROOT
from dplab.cli import main
from dplab.mf import factorizations, saved
from dplab.mf.workload import prefix_sum
from dplab.training import data

RUN = {
    "method": "dp_sgd",
    "dataset": "s",
    "noise_multiplier": 1.0,
    "steps": 2,
    "batch_size": 8,
    "log_every": 1,
    "device": "cpu",
    "accountants": [],
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 40, "test_size": 20, "dim": 5, "classes": 3}, "s"
    )
    out = tmp_path_factory.mktemp("prepared") / "s"
    data.write(out, *data.prepare(cfg, "s"))
    return out


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])


def _flip_in_x(path):
    """One byte of the stored x array changed: caught by the member's CRC-32."""
    raw = bytearray(path.read_bytes())
    with np.load(path) as f:
        at = raw.index(f["x"].tobytes()[:12]) + 7
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def _edit_train_size(path):
    info = json.loads(path.read_text())
    path.write_text(json.dumps({**info, "train_size": info["train_size"] + 1}))


DAMAGE = {
    "train.npz truncated": ("train.npz", _truncate),
    "train.npz not a zip": ("train.npz", lambda p: p.write_bytes(b"\x93NUMPY garbage")),
    "test.npz one byte changed": ("test.npz", _flip_in_x),
    "info.json truncated": ("info.json", _truncate),
    "info.json contradicts the arrays": ("info.json", _edit_train_size),
}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_dataset_file_is_named_with_the_command_that_rewrites_it(
    damage, prepared, tmp_path, capsys
):
    folder = tmp_path / "s"
    shutil.copytree(prepared, folder)
    name, spoil = DAMAGE[damage]
    spoil(folder / name)
    out = tmp_path / "run"
    assert (
        main(["train", "--run-json", json.dumps(RUN), "--data", str(folder), "--out", str(out)])
        == 2
    )
    line = _one_line(capsys)
    blamed = folder / ("train.npz" if damage == "info.json contradicts the arrays" else name)
    assert f"error: {blamed}: prepared dataset " in line
    assert f"`dplab prepare-data --config CONFIG --dataset s --out {folder}`" in line
    assert not out.exists()


def test_the_rewrite_command_names_the_dataset_not_the_folder(prepared, tmp_path, capsys):
    """Dataset s prepared into a folder named copy: `--dataset copy` named no config entry."""
    folder = tmp_path / "copy"
    shutil.copytree(prepared, folder)
    _truncate(folder / "train.npz")
    out = tmp_path / "run"
    args = ["train", "--run-json", json.dumps(RUN), "--data", str(folder), "--out", str(out)]
    assert main(args) == 2
    assert f"`dplab prepare-data --config CONFIG --dataset s --out {folder}`" in _one_line(capsys)


def test_an_audit_on_a_damaged_dataset_names_the_file(prepared, tmp_path, capsys):
    folder = tmp_path / "s"
    shutil.copytree(prepared, folder)
    _truncate(folder / "test.npz")
    out = tmp_path / "audit.csv"
    entry = {
        **yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["audits"][
            "digits_last_iterate_convex"
        ],
        "dataset": "s",
        "seed": 0,
    }
    assert (
        main(["audit", "--audit-json", json.dumps(entry), "--data", str(folder), "--out", str(out)])
        == 2
    )
    assert f"{folder / 'test.npz'}: prepared dataset corrupt or truncated" in _one_line(capsys)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("on_variant", [False, True], ids=["run", "variant"])
def test_an_audit_asking_for_a_missing_gpu_names_the_key_that_asks(
    on_variant, prepared, tmp_path, capsys
):
    """``device: cuda`` without CUDA is refused before any run, naming the audit's key that
    set it: the variant's own, else the audit's ``run``."""
    entry = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["audits"][
        "digits_last_iterate_convex"
    ]
    variant = sorted(entry["methods"])[0]
    if on_variant:
        entry["methods"][variant] = {**(entry["methods"][variant] or {}), "device": "cuda"}
    else:
        entry["run"] = {**entry["run"], "device": "cuda"}
    entry = {**entry, "dataset": "s", "seed": 0, "name": "convex"}
    out = tmp_path / "audit.csv"
    argv = ["audit", "--audit-json", json.dumps(entry), "--data", str(prepared), "--out", str(out)]
    assert main(argv) == 2
    key = f"audits.convex.methods.{variant}.device" if on_variant else "audits.convex.run.device"
    assert f"error: {key}: cuda requested but torch sees no CUDA device" in _one_line(capsys)
    assert not out.exists()


@pytest.fixture
def damaged_factorization(tmp_path, capsys):
    path = tmp_path / "mf" / "banded_T12_m3.npz"
    saved.save(factorizations.factorize("banded", prefix_sum(12), bands=3), path)
    _truncate(path)
    capsys.readouterr()  # the factorization's progress lines
    return path


def test_a_damaged_saved_factorization_names_the_dplab_mf_command(
    damaged_factorization, prepared, tmp_path, capsys
):
    path, cache = damaged_factorization, damaged_factorization.parent
    run = {
        "method": "dp_mf",
        "dataset": "s",
        "strategy": "banded",
        "bands": 3,
        "steps": 12,
        "batch_size": 5,
        "clip": 1.0,
        "noise_multiplier": 1.0,
        "device": "cpu",
        "accountants": [],
    }
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps(run),
                "--data",
                str(prepared),
                "--out",
                str(out),
                "--mf-cache",
                str(cache),
            ]
        )
        == 2
    )
    line = _one_line(capsys)
    assert f"{path}: saved factorization corrupt or truncated" in line
    assert f"`dplab mf --strategy banded --steps 12 --bands 3 --out {path}`" in line
    assert not out.exists()


@pytest.fixture(scope="module")
def summary(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    assert (
        main(["train", "--run-json", json.dumps(RUN), "--data", str(prepared), "--out", str(out)])
        == 0
    )
    return out / "summary.json"


@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "--accountants", "rdp", "--summary", "{}"],
        [
            "figure-table",
            "mf_vs_dpsgd",
            "--params-json",
            '{"grid": "g"}',
            "--inputs",
            "summaries={}",
        ],
        [
            "figure-table",
            "privacy_utility",
            "--params-json",
            '{"grids": ["g"]}',
            "--inputs",
            "summaries={}",
        ],
    ],
)
@pytest.mark.parametrize("damage", ["truncated", "not a summary"])
def test_a_damaged_summary_given_to_sweep_or_figure_commands_is_named(
    command, damage, summary, tmp_path, capsys
):
    path = tmp_path / "summary.json"
    if damage == "truncated":
        path.write_bytes(summary.read_bytes()[:-40])
    else:
        path.write_text(
            json.dumps({"name": "s", "train_size": 40})
        )  # e.g. an info.json given by mistake
    out = tmp_path / "out.csv"
    assert main([*command[:-1], command[-1].format(path), "--out", str(out)]) == 2
    line = _one_line(capsys)
    problem = (
        "corrupt or truncated (JSONDecodeError" if damage == "truncated" else "has no key 'run'"
    )
    assert (
        f"{path}: run summary {problem}" in line
        and f"`dplab train --config CONFIG --run RUN --data DATA --out {tmp_path}`" in line
    )
    assert not out.exists()


def test_a_damaged_factorization_given_to_its_figure_is_named(
    damaged_factorization, tmp_path, capsys
):
    out = tmp_path / "table.csv"
    assert (
        main(
            [
                "figure-table",
                "mf_structure",
                "--params-json",
                '{"grid": "g"}',
                "--inputs",
                f"factorizations={damaged_factorization}",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    line = _one_line(capsys)
    assert f"{damaged_factorization}: saved factorization corrupt or truncated" in line
    assert (
        f"`dplab mf --strategy STRATEGY --steps T [--bands M] --out {damaged_factorization}`"
        in line
    )
    assert not out.exists()


def test_every_json_refuses_a_key_given_twice_naming_it():
    """Python's json keeps the last of two equal keys; dplab's reader refuses them at any depth,
    and reads an object of distinct keys exactly as json does."""
    from dplab.inputs import DuplicateKey, loads

    text = '{"a": 1, "b": {"c": [1, {"d": 2}], "e": null}}'
    assert loads(text) == json.loads(text)
    for doubled, key in (('{"a": 1, "a": 2}', "a"), ('{"x": [{"b": 1, "b": 1}]}', "b")):
        with pytest.raises(DuplicateKey, match=f"key '{key}' given twice"):
            loads(doubled)


@pytest.mark.parametrize(
    "text, depth",
    [("[" * 100_000, 100_000), ('{"a": "[[[[", "b": [[1]]}', 3), ('["\\"[[[[", 1]', 1)],
)
def test_json_nesting_is_counted_outside_strings_and_bounded(text, depth):
    from dplab.inputs import DEPTH_MAX, _json_depth, loads

    assert _json_depth(text) == depth
    if depth > DEPTH_MAX:
        with pytest.raises(ValueError, match="DEPTH_MAX"):
            loads(text)
    else:
        assert loads(text) == json.loads(text)


def test_yaml_aliases_are_bounded_by_their_expanded_size_not_their_text(tmp_path):
    """A "billion laughs" is refused as PyYAML composes it (its text is a few hundred bytes, its
    expansion 9^L strings); the same aliases within the limit load as PyYAML loads them."""
    from dplab.errors import DPLabError
    from dplab.schemas import YAML_NODES_MAX, load_yaml

    def bomb(levels: int) -> str:
        lines = ["a0: &a0 [" + ", ".join(["x"] * 9) + "]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
        return "\n".join(lines) + "\n"

    sizes = [10]  # nodes of a_i expanded: the list and its 9 items
    while len(sizes) < 9:
        sizes.append(1 + 9 * sizes[-1])
    document = [
        1 + sum(1 + n for n in sizes[:levels]) for levels in range(1, 10)
    ]  # the mapping, keys, lists
    small = max(levels for levels in range(1, 10) if document[levels - 1] <= YAML_NODES_MAX)
    path = tmp_path / "c.yaml"
    path.write_text(bomb(small))
    assert load_yaml(path) == yaml.safe_load(bomb(small))
    path.write_text(
        bomb(9)
    )  # refused at the first anchor past the limit, long before a8's 4.8e8 nodes
    first = next(n for n in sizes if n > YAML_NODES_MAX)
    with pytest.raises(
        DPLabError, match=f"expands to {first} nodes .* \\(line {sizes.index(first) + 1}\\)"
    ):
        load_yaml(path)
    path.write_text("a: &x [*x]\n")
    with pytest.raises(DPLabError, match="recursive"):
        load_yaml(path)


@pytest.mark.parametrize(
    "args",
    [
        ["prepare-data", "--dataset", "synthetic", "--config", ""],
        ["figure-table", "gaussian_sigma", "--config", ""],
        ["check-config", ""],
    ],
)
def test_an_empty_config_path_is_refused_naming_it(args, tmp_path, capsys):
    """`--config ''` is falsy: prepare-data took the --dataset-json branch with no JSON (an
    internal error, found by the random CLI fuzz); Path('') is the working folder."""
    assert main([*args, "--out", str(tmp_path / "out")] if args[0] != "check-config" else args) == 2
    assert _one_line(capsys).endswith("config: is an empty path; give a file")
    assert not (tmp_path / "out").exists()
