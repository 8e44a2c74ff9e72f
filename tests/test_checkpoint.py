"""Resume after a crash when a checkpoint is damaged, and what a run's bytes depend on
(docs/training.md, Reliability and Determinism): a truncated, changed or half-rotated
checkpoint is set aside and the run resumes from the last whole one or from step 0, saying
which, and ends byte-identical to an uninterrupted run; the torch thread count is recorded in
summary.json and a checkpoint written with another one is not resumed."""

import hashlib
import io
import json
import logging

import pytest
import torch

from dplab.cli import main
from dplab.training import checkpoint, data, loop
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings

FILES = ("summary.json", "metrics.csv", "model.pt")
RUN = {
    "method": "dp_sgd",
    "noise_multiplier": 1.0,
    "steps": 20,
    "batch_size": 64,
    "lr": 1.0,
    "log_every": 5,
    "checkpoint_every": 7,
    "device": "cpu",
    "accountants": ["rdp"],
    "dataset": "digits",
}


@pytest.fixture
def threads():
    """Restores torch's thread count that a test changes."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reference(digits_dir, tmp_path_factory):
    """An uninterrupted run (one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("reference")
    loop.train(RunSettings.of(resolve_run(RUN)), data.load(digits_dir), out)
    torch.set_num_threads(before)
    return out


def _crash_after(step):
    def hook(t):
        if t == step:
            raise KeyboardInterrupt

    return hook


def _interrupted(digits_dir, out):
    """A run killed after step 16: checkpoint.pt at step 14, checkpoint.prev.pt at step 7."""
    with pytest.raises(KeyboardInterrupt):
        loop.train(
            RunSettings.of(resolve_run(RUN)), data.load(digits_dir), out, hook=_crash_after(16)
        )
    assert checkpoint.read(out / "checkpoint.pt")["step"] == 14
    assert checkpoint.read(out / "checkpoint.prev.pt")["step"] == 7


def _flip_a_tensor_byte(path):
    """Change one byte inside the parameters' data: torch.load alone would load it silently."""
    raw = bytearray(path.read_bytes())
    weight = checkpoint.read(path)["params"]["1.weight"]  # Flatten, Linear: logistic regression
    marker = weight.numpy().tobytes()[:16]
    at = raw.index(marker) + 5
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))
    payload = bytes(raw).partition(b"\n")[2]
    assert not torch.equal(
        torch.load(io.BytesIO(payload), weights_only=True)["params"]["1.weight"], weight
    )


def _no_state(path):
    """A whole file (header, matching digest) whose archive holds a list, not a run's state."""
    payload = checkpoint.torch_bytes([1, 2])
    digest = hashlib.sha256(payload).hexdigest().encode()
    path.write_bytes(checkpoint.HEADER + digest + b"\n" + payload)


DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "one byte changed": _flip_a_tensor_byte,
    "garbage": lambda p: p.write_bytes(b"\x00garbage"),
    "no state": _no_state,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_set_aside_and_the_run_resumes_from_the_previous_one(
    damage, digits_dir, reference, tmp_path, caplog, threads
):
    torch.set_num_threads(1)
    _interrupted(digits_dir, tmp_path)
    DAMAGE[damage](tmp_path / "checkpoint.pt")
    resumed = []
    with caplog.at_level(logging.WARNING, logger="dplab"):
        loop.train(
            RunSettings.of(resolve_run(RUN)), data.load(digits_dir), tmp_path, hook=resumed.append
        )
    assert resumed[0] == 8  # after the checkpoint of step 7, the previous one
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        "checkpoint.pt is corrupt" in line
        and f"resuming from {tmp_path / 'checkpoint.prev.pt'} at step 7" in line
    )
    [aside] = tmp_path.glob("checkpoint.pt.corrupt-*")
    assert aside.name in line
    assert (
        not (tmp_path / "checkpoint.pt").exists() and not (tmp_path / "checkpoint.prev.pt").exists()
    )
    assert all((reference / f).read_bytes() == (tmp_path / f).read_bytes() for f in FILES)


def test_both_checkpoints_damaged_restarts_from_step_0_and_keeps_them(
    digits_dir, reference, tmp_path, caplog, threads
):
    torch.set_num_threads(1)
    _interrupted(digits_dir, tmp_path)
    DAMAGE["truncated"](tmp_path / "checkpoint.pt")
    _flip_a_tensor_byte(tmp_path / "checkpoint.prev.pt")
    resumed = []
    with caplog.at_level(logging.WARNING, logger="dplab"):
        loop.train(
            RunSettings.of(resolve_run(RUN)), data.load(digits_dir), tmp_path, hook=resumed.append
        )
    assert resumed[0] == 1
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.endswith("restarting from step 0") and "SHA-256 does not match" in line
    assert (
        len(list(tmp_path.glob("checkpoint.pt.corrupt-*")))
        == len(list(tmp_path.glob("checkpoint.prev.pt.corrupt-*")))
        == 1
    )
    assert all((reference / f).read_bytes() == (tmp_path / f).read_bytes() for f in FILES)


def test_killed_between_rotating_and_writing_resumes_from_the_previous_checkpoint(
    digits_dir, reference, tmp_path, threads
):
    """checkpoint.pt renamed to checkpoint.prev.pt, the new one not yet written."""
    torch.set_num_threads(1)
    _interrupted(digits_dir, tmp_path)
    (tmp_path / "checkpoint.pt").replace(tmp_path / "checkpoint.prev.pt")
    resumed = []
    loop.train(
        RunSettings.of(resolve_run(RUN)), data.load(digits_dir), tmp_path, hook=resumed.append
    )
    assert resumed[0] == 15
    assert all((reference / f).read_bytes() == (tmp_path / f).read_bytes() for f in FILES)


def test_cli_rerun_over_a_garbled_checkpoint_says_so_in_one_line_and_completes(
    digits_dir, reference, tmp_path, capsys, threads
):
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"PK\x03\x04 not a whole archive")
    args = [
        "train",
        "--run-json",
        json.dumps(RUN),
        "--data",
        str(digits_dir),
        "--out",
        str(out),
        "--threads",
        "1",
    ]
    assert main(args) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "checkpoint" in line]
    assert (
        len(err) == 1
        and "is corrupt (no dplab checkpoint header)" in err[0]
        and "restarting from step 0" in err[0]
    )
    assert all((reference / f).read_bytes() == (out / f).read_bytes() for f in FILES)


def test_threads_are_recorded_and_a_checkpoint_of_another_thread_count_is_not_resumed(
    digits_dir, reference, tmp_path, caplog, threads
):
    torch.set_num_threads(2)
    with pytest.raises(KeyboardInterrupt):
        loop.train(
            RunSettings.of(resolve_run(RUN)), data.load(digits_dir), tmp_path, hook=_crash_after(9)
        )
    assert checkpoint.read(tmp_path / "checkpoint.pt")["environment"]["threads"] == 2
    torch.set_num_threads(1)
    resumed = []
    with caplog.at_level(logging.WARNING, logger="dplab"):
        summary = loop.train(
            RunSettings.of(resolve_run(RUN)), data.load(digits_dir), tmp_path, hook=resumed.append
        )
    assert resumed[0] == 1
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "written with threads=2 (now 1)" in line and line.endswith("restarting from step 0")
    env = summary.environment
    assert env["threads"] == 1 and env["device"] == "cpu" and env["torch"] == torch.__version__
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert all((reference / f).read_bytes() == (tmp_path / f).read_bytes() for f in FILES)


def test_cli_records_the_threads_torch_used(digits_dir, tmp_path, threads):
    out = tmp_path / "run"
    args = [
        "train",
        "--run-json",
        json.dumps({**RUN, "steps": 2}),
        "--data",
        str(digits_dir),
        "--out",
        str(out),
    ]
    assert main([*args, "--threads", "3"]) == 0
    assert json.loads((out / "summary.json").read_text())["environment"]["threads"] == 3


def test_a_later_phase_resumes_only_a_checkpoint_from_the_same_start(digits_dir, tmp_path, caplog):
    """A later phase's config does not name the phases before it, so its checkpoint records the
    parameters it began from: killed after step 16, it resumes from the same start (and ends as an
    uninterrupted run from it) but restarts from step 0 from any other, e.g. after an earlier
    phase was changed and trained again: a resumed run would release parameters that the phases
    now claimed (and accounted) did not produce."""
    settings, digits = RunSettings.of(resolve_run(RUN)), data.load(digits_dir)
    loop.train(settings, digits, tmp_path / "phase0")
    base = torch.load(tmp_path / "phase0" / "model.pt", weights_only=True)
    other = {k: v + 0.01 for k, v in base.items()}
    for begin, first_step in ((base, 15), (other, 1)):
        out = tmp_path / f"resumed{first_step}"
        with pytest.raises(KeyboardInterrupt):
            loop.train(settings, digits, out, hook=_crash_after(16), start=base)
        resumed = []
        with caplog.at_level(logging.WARNING, logger="dplab"):
            loop.train(settings, digits, out, hook=resumed.append, start=begin)
        assert resumed[0] == first_step
        clean = tmp_path / f"clean{first_step}"
        loop.train(settings, digits, clean, start=begin)
        assert all((clean / f).read_bytes() == (out / f).read_bytes() for f in FILES)
    assert "for another run config, dataset or start; restarting from step 0" in caplog.text


def test_a_retried_job_of_several_runs_does_not_train_its_finished_runs_again(
    digits_dir, reference, tmp_path, step_loops, threads, caplog, monkeypatch
):
    """A job of a grid cell's runs (`group_runs`) killed in its second run, retried after
    Snakemake deleted both runs' results: the first run's results are written again from its
    final state, with no step trained, the second resumes from its checkpoint, both end byte for
    byte as uninterrupted runs, and the job leaves no checkpoint. Each job hashes its dataset
    once for the runs' fingerprints (:attr:`data.Dataset.digest`)."""
    from dplab.commands.train import _train

    hashed = []
    digest = data.tensors_digest
    monkeypatch.setattr(data, "tensors_digest", lambda t: hashed.append(sorted(t)) or digest(t))
    torch.set_num_threads(1)
    step_loops.crash = ("b", 16)
    cfgs = [resolve_run(RUN), resolve_run({**RUN, "seed": 7})]
    outs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with pytest.raises(KeyboardInterrupt):
        _train(cfgs, str(digits_dir), outs)
    assert checkpoint.read(tmp_path / "a" / "checkpoint.pt")["step"] == RUN["steps"]
    for name in ("a", "b"):  # what Snakemake removes of a failed job: its outputs
        for f in FILES:
            (tmp_path / name / f).unlink(missing_ok=True)
    step_loops.crash = None
    with caplog.at_level(logging.WARNING, logger="dplab"):
        _train(cfgs, str(digits_dir), outs)
    resumed = [r.getMessage() for r in caplog.records if "resuming" in r.getMessage()]
    assert [m.endswith("no step trained") for m in resumed] == [True, False], resumed
    assert hashed == [["x_test", "x_train", "y_test", "y_train"]] * 2  # one per job
    assert step_loops.calls == [("a", 1, 20), ("b", 1, 16), ("a", None, 0), ("b", 15, 6)]
    assert all((reference / f).read_bytes() == (tmp_path / "a" / f).read_bytes() for f in FILES)
    clean = tmp_path / "clean"
    loop.train(RunSettings.of(cfgs[1]), data.load(digits_dir), clean)
    assert all((clean / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in FILES)
    assert not list(tmp_path.glob("*/checkpoint*"))


def test_a_checkpoint_of_other_records_under_the_same_info_json_is_not_resumed(
    digits_dir, tmp_path, caplog, threads
):
    """Relabelled records keep info.json (sizes, config, path) as it was: the fingerprint hashes
    the arrays too, so the run restarts rather than continue the old data's parameters."""
    torch.set_num_threads(1)
    _interrupted(digits_dir, tmp_path)
    changed = data.load(digits_dir)
    changed.y_train = (changed.y_train + 1) % changed.info["classes"]
    resumed = []
    with caplog.at_level(logging.WARNING, logger="dplab"):
        loop.train(RunSettings.of(resolve_run(RUN)), changed, tmp_path, hook=resumed.append)
    assert resumed[0] == 1
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "ignoring" in line and line.endswith("restarting from step 0")


def test_the_source_digest_changes_with_one_byte_of_the_code_and_ignores_caches(tmp_path):
    """dplab edited without a new version is other code: its checkpoints are not resumed."""
    tree = tmp_path / "dplab"
    (tree / "training").mkdir(parents=True)
    (tree / "training" / "step.py").write_text("lr = -1.0\n")
    (tree / "schemas.yaml").write_text("a: 1\n")
    before = checkpoint.source_digest.__wrapped__(tree)
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "step.cpython-311.pyc").write_bytes(b"\x00")
    assert checkpoint.source_digest.__wrapped__(tree) == before
    (tree / "training" / "step.py").write_text("lr = -0.5\n")
    assert checkpoint.source_digest.__wrapped__(tree) != before
    assert len(checkpoint.source_digest()) == 64  # the installed package's, cached
