"""Exit codes mean one thing, and nothing is left half-written.

A run that diverges ends with exit 3 and one line naming the step; a write that fails (a full
disk: a small tmpfs where this process may mount one, else an injected ENOSPC) ends with exit 3,
one line naming the file, and no output left behind — not a run folder without its summary, not a
PDF without its PNG (docs/reliability.md, "Exit codes", "Nothing half-written")."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import probe
import pytest

from dplab import io as dplab_io
from dplab.cli import EXIT_CODES, INTERRUPTED, RUN_FAILED, main

RUN = {
    "method": "dp_sgd",
    "model": "logreg",
    "dataset": "synthetic",
    "steps": 6,
    "batch_size": 20,
    "lr": 0.5,
    "clip": 1.0,
    "noise_multiplier": 1.0,
    "delta": 1e-5,
    "accountant": "rdp",
    "accountants": ["rdp"],
    "log_every": 3,
    "device": "cpu",
}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("synthetic") / "data"
    spec = {"kind": "synthetic", "train_size": 200, "test_size": 50, "dim": 5}
    assert (
        main(
            [
                "prepare-data",
                "--dataset-json",
                json.dumps(spec),
                "--dataset",
                "synthetic",
                "--out",
                str(folder),
            ]
        )
        == 0
    )
    return folder


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("table") / "gaussian_sigma.csv"
    assert main(["figure-table", "gaussian_sigma", "--params-json", "{}", "--out", str(path)]) == 0
    return path


def _one_line(err: str) -> str:
    lines = probe.error_lines(err)
    assert len(lines) == 1, err
    return lines[0]


def test_help_states_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert EXIT_CODES in out
    for code, meaning in (
        ("0", "every output written whole"),
        ("2", "bad input"),
        ("3", "diverged"),
    ):
        assert any(line.split()[:1] == [code] and meaning in line for line in out.splitlines()), (
            code,
            out,
        )


@pytest.mark.parametrize(
    "change",
    [
        {
            "method": "sgd",
            "l2": 1.0,
            "lr": 1e20,
            "noise_multiplier": None,
            "accountant": None,
            "accountants": None,
        },  # NaN after a few steps (was exit 2)
        {"lr": 1e250},
    ],
)  # a step size past float32 (was exit 1, an internal error)
def test_a_diverging_run_exits_3_naming_the_step_and_leaves_nothing(
    synthetic, tmp_path, capsys, change
):
    out = tmp_path / "runs" / "diverged"
    code = main(
        [
            "train",
            "--run-json",
            json.dumps({k: v for k, v in {**RUN, **change}.items() if v is not None}),
            "--data",
            str(synthetic),
            "--out",
            str(out),
        ]
    )
    line = _one_line(capsys.readouterr().err)
    assert code == RUN_FAILED, line
    assert line.startswith("dplab train: error: training diverged: ") and " at step " in line, line
    assert probe.written(tmp_path) == []


def _commands(synthetic: Path, table: Path, out: Path) -> dict[str, list[str]]:
    """A command line per kind of output, each writing under ``out``."""
    return {
        "train": [
            "train",
            "--run-json",
            json.dumps(RUN),
            "--data",
            str(synthetic),
            "--out",
            str(out / "run"),
        ],
        "figure-draw": [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            str(table),
            "--pdf",
            str(out / "f.pdf"),
            "--png",
            str(out / "f.png"),
        ],
        "prepare-data": [
            "prepare-data",
            "--dataset-json",
            json.dumps({"kind": "synthetic", "train_size": 100, "test_size": 20, "dim": 3}),
            "--out",
            str(out / "data"),
        ],
        "figure-table": [
            "figure-table",
            "gaussian_sigma",
            "--params-json",
            "{}",
            "--out",
            str(out / "t.csv"),
        ],
        "mf": ["mf", "--strategy", "optimal", "--steps", "8", "--out", str(out / "f.npz")],
    }


#: (command, the file that fails): train writes grad_norms.csv's header, then model.pt, metrics.csv,
#: metrics.json, summary.json; figure-draw the PDF, then the PNG; prepare-data
#: train.npz, test.npz, info.json
@pytest.mark.parametrize(
    "command, fail_at",
    [
        ("train", 1),
        ("train", 2),
        ("train", 5),
        ("figure-draw", 1),
        ("figure-draw", 2),
        ("prepare-data", 2),
        ("prepare-data", 3),
    ],
)
def test_a_write_failing_at_any_file_exits_3_and_leaves_nothing(
    synthetic, table, tmp_path, capsys, monkeypatch, command, fail_at
):
    """The disk fills at the ``fail_at``-th file the command writes (ENOSPC as its temporary file
    is made): exit 3, one line naming the file, nothing under the output folder."""
    out = tmp_path / "out"
    written = [0]
    real = dplab_io.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        written[0] += 1
        if written[0] == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device", kwargs.get("dir"))
        return real(*args, **kwargs)

    monkeypatch.setattr(dplab_io.tempfile, "mkstemp", mkstemp)
    code = main(_commands(synthetic, table, out)[command])
    line = _one_line(capsys.readouterr().err)
    assert code == RUN_FAILED and "No space left on device" in line, line
    assert probe.written(tmp_path) == []


@pytest.mark.parametrize("command, size", [("train", "8k"), ("figure-draw", "24k")])
def test_a_full_disk_exits_3_and_leaves_nothing(synthetic, table, tmp_path, capsys, command, size):
    """On a real nearly full file system (a tmpfs of ``size``; skipped where
    mount is not allowed)."""
    disk = tmp_path / "disk"
    if not probe.mount(disk, size):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        code = main(_commands(synthetic, table, disk / "results")[command])
        line = _one_line(capsys.readouterr().err)
        assert code == RUN_FAILED and "No space left on device" in line, line
        assert probe.written(disk) == []
    finally:
        probe.umount(disk)


def test_a_run_killed_after_a_checkpoint_leaves_only_the_checkpoint(
    synthetic, tmp_path, monkeypatch
):
    """The run's files land together at its end: a run stopped after its first checkpoint (as by
    ``kill -9``) leaves the checkpoint to resume from, and no grad_norms.csv or header-only
    individual_epsilon.csv beside it (docs/training.md, "Recovering from a crash")."""
    from dplab.training import checkpoint

    save = checkpoint.save

    def save_then_die(out, state):
        save(out, state)
        raise KeyboardInterrupt  # an interrupt keeps the folder as it is, as a kill does

    monkeypatch.setattr(checkpoint, "save", save_then_die)
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--run-json",
                json.dumps({**RUN, "checkpoint_every": 3}),
                "--data",
                str(synthetic),
                "--out",
                str(out),
            ]
        )
        == INTERRUPTED
    )
    left = probe.written(out)  # the checkpoint alone, kept to resume from
    assert left and all(name.startswith("checkpoint") for name in left), left


def test_a_folder_has_one_writer_and_a_killed_one_leaves_no_lock(synthetic, tmp_path, capsys):
    """While another process holds a run folder (as a running ``dplab train`` does), a second
    train into it is refused in one line naming the folder and the holder's pid, and writes
    nothing; once the holder is killed with SIGKILL the kernel has released its lock, and the
    next train runs."""
    out = tmp_path / "runs" / "a"
    holder = probe.hold(str(out), killed=False)
    try:
        argv = ["train", "--run-json", json.dumps(RUN), "--data", str(synthetic), "--out", str(out)]
        line = probe.refused(argv, capsys, out)
        assert f"{out} is being written by another dplab command (pid {holder.pid})" in line, line
    finally:
        holder.kill()
        holder.wait()
    assert main(argv) == 0
    assert (out / "summary.json").is_file() and not list(
        out.parent.glob(f"{dplab_io.LOCK_PREFIX}*")
    )
