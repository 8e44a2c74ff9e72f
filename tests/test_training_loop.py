"""The one training loop: samplers, the noised update against a hand computation, projection,
regularization, empty Poisson batches; nothing but the one loop updates parameters."""

import ast
import math
from pathlib import Path

import pytest
import torch
from torch import nn

import dplab
from dplab.philox import CpuGenerator
from dplab.schemes import Sampling
from dplab.training import data, loop, models
from dplab.training.per_example import CLIP_EPS
from dplab.training.resolve import resolve_run
from dplab.training.settings import RunSettings


# ------------------------------------------------------------------------------ samplers
def test_poisson_batch_sizes_are_binomial_and_include_empty():
    n, b, draws = 100, 3, 4000
    sampler, g = Sampling("poisson").sampler(n, b), torch.Generator().manual_seed(1)
    sizes = torch.tensor(
        [len(sampler.sample(t, g)) for t in range(1, draws + 1)], dtype=torch.float64
    )
    q = b / n
    assert abs(float(sizes.mean()) - b) < 4 * math.sqrt(n * q * (1 - q) / draws)
    assert abs(float(sizes.var()) - n * q * (1 - q)) < 0.3  # Binomial variance nq(1-q) = 2.91
    empty = float((sizes == 0).double().mean())
    assert abs(empty - (1 - q) ** n) < 0.03  # P(empty) = 0.97^100 = 0.048
    assert int(sizes.max()) > b


def test_without_replacement_fresh_fixed_size_batches():
    sampler, g = Sampling("without_replacement").sampler(50, 7), torch.Generator().manual_seed(0)
    batches = [sampler.sample(t, g) for t in range(1, 30)]
    assert all(len(bt) == 7 and len(set(bt.tolist())) == 7 for bt in batches)
    assert len({tuple(bt.tolist()) for bt in batches}) == len(batches)


@pytest.mark.parametrize("reshuffle", [False, True])
def test_shuffle_disjoint_batches_per_epoch(reshuffle):
    n, b = 23, 5  # Q = 4 batches, 3 examples never used
    sampler, g = Sampling("shuffle").sampler(n, b, reshuffle), torch.Generator().manual_seed(0)
    epochs = [[sampler.sample(4 * e + i + 1, g).tolist() for i in range(4)] for e in range(3)]
    for batches in epochs:
        flat = [i for bt in batches for i in bt]
        assert len(flat) == 20 and len(set(flat)) == 20
    assert (epochs[0] == epochs[1] == epochs[2]) is (not reshuffle)
    assert sampler.epoch(8) == 2.0


def test_balls_in_bins_every_example_once_per_epoch_at_a_uniform_step():
    n, b, epochs = 30, 6, 3000  # t = 5 steps per epoch
    sampler, g = Sampling("balls_in_bins").sampler(n, b), torch.Generator().manual_seed(0)
    counts = torch.zeros(5, n)  # counts[j, i]: epochs in which example i was in step j
    together = 0
    for e in range(epochs):
        batches = [sampler.sample(5 * e + j + 1, g) for j in range(5)]
        flat = torch.cat(batches)
        assert sorted(flat.tolist()) == list(range(n))  # each example exactly once per epoch
        for j, bt in enumerate(batches):
            counts[j, bt] += 1
        together += any(0 in bt.tolist() and 1 in bt.tolist() for bt in batches)
    # uniform step: each cell ~ Binomial(epochs, 1/5); chi-square over the 5 steps of each example
    chi2 = ((counts - epochs / 5) ** 2 / (epochs / 5)).sum(0)
    assert float(chi2.mean()) == pytest.approx(
        4.0, abs=0.6
    )  # mean of χ²(4) over 30 examples: 4 ± 0.5
    assert float(chi2.max()) < 25.0  # P(χ²(4) > 25) ≈ 5e-5
    # independent placements: two examples share a step with probability 1/t
    assert abs(together / epochs - 0.2) < 4 * math.sqrt(0.2 * 0.8 / epochs)
    sizes = [len(sampler.sample(t, g)) for t in range(1, 501)]
    assert min(sizes) != max(sizes) and sum(sizes) / len(sizes) == pytest.approx(n / 5, rel=0.05)
    assert sampler.epoch(10) == 2.0


def test_balls_in_bins_resumes_mid_epoch_from_its_state():
    n, b = 41, 4  # t = 10
    sampler, g = Sampling("balls_in_bins").sampler(n, b), torch.Generator().manual_seed(3)
    for step in range(1, 8):
        sampler.sample(step, g)
    state, g_state = sampler.state_dict(), g.get_state()
    rest = [sampler.sample(step, g).tolist() for step in range(8, 25)]
    again, g2 = Sampling("balls_in_bins").sampler(n, b), torch.Generator()
    again.load_state_dict(state)
    g2.set_state(g_state)
    assert [again.sample(step, g2).tolist() for step in range(8, 25)] == rest


# ------------------------------------------------------------------- the update by hand
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    cfg = data.resolve_dataset(
        {"kind": "synthetic", "train_size": 40, "test_size": 10, "dim": 5, "classes": 3}, "s"
    )
    out = tmp_path_factory.mktemp("synth")
    data.write(out, *data.prepare(cfg, "s"))
    return data.load(out)


def _naive_clipped_sum(model, x, y, clip, l2):
    total = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    for i in range(len(x)):
        model.zero_grad()
        loss = nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        loss = loss + 0.5 * l2 * sum((p * p).sum() for p in model.parameters())
        loss.backward()
        norm = math.sqrt(sum(float((p.grad**2).sum()) for p in model.parameters()))
        for k, p in model.named_parameters():
            total[k] += min(1.0, clip / (norm + CLIP_EPS)) * p.grad
    return total


def _run(cfg, ds, tmp_path, **kw):
    cfg = resolve_run(
        {"log_every": 1, "checkpoint_every": 0, "device": "cpu", "accountants": [], **cfg}
    )
    loop.train(RunSettings.of(cfg), ds, tmp_path, **kw)
    return cfg, torch.load(tmp_path / "model.pt")


def _start(cfg, ds, w0):
    """The model at the run's initial point, then moved to w0 (a point with distinct gradients)."""
    model = models.build(RunSettings.of(cfg), ds.info["input_shape"], ds.info["classes"])
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(w0[k])
    return model


@pytest.mark.parametrize(
    "method,extra",
    [
        ("dp_sgd", {"l2": 0.1}),
        ("dp_sgd", {"sampling": "without_replacement"}),
        ("dp_gd", {}),
        ("noisy_gd", {"diameter": 0.05}),
        ("projected_dp_sgd", {"diameter": 0.05, "sampling": "without_replacement"}),
        ("projected_dp_sgd", {"diameter": 0.05}),
        ("regularized_dp_sgd", {"regularization": 0.3}),
        (
            "dp_sgd_fixed_batches",
            {"neighbouring": "replace_one"},
        ),  # add_remove: n mod b = 0 changes t (refused)
    ],
)
def test_two_steps_match_hand_computation(method, extra, synth, tmp_path):
    """Steps 1-2 of each method equal w ← Π((1−λ)w − η(g/m + σC·Z/b)) computed by hand to 1e-6."""
    run = {
        "method": method,
        "steps": 2,
        "batch_size": 8,
        "lr": 0.7,
        "clip": 0.05,
        "noise_multiplier": 1.3,
        "seed": 3,
        **extra,
    }
    cfg, got = _run(run, synth, tmp_path)
    n, sigma, clip, lr = 40, 1.3, 0.05, 0.7
    b = n if cfg["sampling"] == "full_batch" else 8
    model = models.build(RunSettings.of(cfg), synth.info["input_shape"], synth.info["classes"])
    w = {k: p.detach().clone() for k, p in model.named_parameters()}
    g = torch.Generator().manual_seed(3)  # the batches; the noise: its own stream (loop.streams)
    noise = CpuGenerator(3 + loop.NOISE_SEED_OFFSET)
    perm = None
    for step in (1, 2):
        if cfg["sampling"] == "poisson":
            idx = torch.nonzero(torch.rand(n, generator=g) < b / n).flatten()
        elif cfg["sampling"] == "without_replacement":
            idx = torch.randperm(n, generator=g)[:b]
        elif cfg["sampling"] == "shuffle":
            perm = torch.randperm(n, generator=g) if perm is None else perm
            idx = perm[(step - 1) * b : step * b]
        else:
            idx = torch.arange(n)
        total = _naive_clipped_sum(
            _start(cfg, synth, w), synth.x_train[idx], synth.y_train[idx], clip, cfg["l2"]
        )
        m = b if cfg["normalize"] == "expected" else max(len(idx), 1)
        lam = cfg["regularization"] or 0.0
        for k in w:
            z = noise.normal(w[k].shape)
            w[k] = (1 - lam) * w[k] - lr * (total[k] / m + sigma * clip * z / b)
        if cfg["diameter"]:
            norm = math.sqrt(sum(float((v**2).sum()) for v in w.values()))
            w = {k: v * min(1.0, cfg["diameter"] / 2 / norm) for k, v in w.items()}
    for k in w:
        torch.testing.assert_close(got[k], w[k], atol=1e-6, rtol=0)
    if cfg["diameter"]:
        assert (
            math.sqrt(sum(float((v**2).sum()) for v in got.values())) <= cfg["diameter"] / 2 + 1e-6
        )


def test_empty_poisson_batch_is_a_pure_noise_step(synth, tmp_path):
    n, b = 40, 1
    seed = next(
        s
        for s in range(100)
        if not (torch.rand(n, generator=torch.Generator().manual_seed(s)) < b / n).any()
    )
    cfg, got = _run(
        {
            "method": "dp_sgd",
            "steps": 1,
            "batch_size": b,
            "lr": 0.5,
            "clip": 1.0,
            "noise_multiplier": 2.0,
            "seed": seed,
        },
        synth,
        tmp_path,
    )
    noise = CpuGenerator(seed + loop.NOISE_SEED_OFFSET)
    for v in got.values():  # logreg starts at 0
        torch.testing.assert_close(v, -0.5 * 2.0 * noise.normal(v.shape) / b, atol=1e-6, rtol=0)


def test_sgd_is_plain_minibatch_sgd(synth, tmp_path):
    cfg, got = _run(
        {"method": "sgd", "steps": 1, "batch_size": 10, "lr": 0.3, "seed": 5}, synth, tmp_path
    )
    g = torch.Generator().manual_seed(5)
    idx = torch.randperm(40, generator=g)[:10]
    model = models.build(RunSettings.of(cfg), synth.info["input_shape"], synth.info["classes"])
    nn.functional.cross_entropy(model(synth.x_train[idx]), synth.y_train[idx]).backward()
    for k, p in model.named_parameters():
        torch.testing.assert_close(got[k], -0.3 * p.grad, atol=1e-6, rtol=0)


class _Ones:
    """A stand-in correlated source: the loop must take it without changes."""

    def __init__(self):
        self.calls = []

    def sample(self, step, like, generator):
        self.calls.append(step)
        return {k: torch.ones_like(p) for k, p in like.items()}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_noise_source_is_pluggable(synth, tmp_path):
    src = _Ones()
    cfg, got = _run(
        {"method": "dp_gd", "steps": 3, "lr": 0.1, "clip": 1e-9, "noise_multiplier": 1.0},
        synth,
        tmp_path,
        noise_source=src,
    )
    assert src.calls == [1, 2, 3]
    for v in got.values():  # clip ≈ 0: only the noise moves w, by −η·1/n per step
        torch.testing.assert_close(v, torch.full_like(v, -3 * 0.1 / 40), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "normalize,diameter,regularization", [("expected", None, 0.0), ("realized", 0.5, 0.1)]
)
def test_stacked_step_is_each_runs_own_step_exactly(normalize, diameter, regularization):
    """The audit's lockstep runs (leading run axis) take the very step of
    loop.train, bit for bit."""
    from dplab.training.step import denominator, project, update

    gen = torch.Generator().manual_seed(3)
    runs = [
        {"w": torch.randn(10, 7, generator=gen), "b": torch.randn(10, generator=gen)}
        for _ in range(3)
    ]
    grads = [{k: torch.randn(v.shape, generator=gen) for k, v in r.items()} for r in runs]
    noise = [{k: torch.randn(v.shape, generator=gen) for k, v in r.items()} for r in runs]
    sizes = [5, 0, 9]
    stack = lambda dicts: {k: torch.stack([d[k] for d in dicts]) for k in dicts[0]}  # noqa: E731
    stacked = stack([{k: v.clone() for k, v in r.items()} for r in runs])
    update(
        stacked,
        stack(grads),
        stack(noise),
        lr=0.3,
        denom=denominator(normalize, 8, torch.tensor(sizes)),
        b=8,
        regularization=regularization,
    )
    moved = project(stacked, diameter, stacked=True)
    for r, params in enumerate(runs):
        update(
            params,
            grads[r],
            noise[r],
            lr=0.3,
            denom=denominator(normalize, 8, sizes[r]),
            b=8,
            regularization=regularization,
        )
        one = project(params, diameter)
        for k in params:
            assert torch.equal(stacked[k][r], params[k])
        if diameter is not None:
            assert bool(moved[r]) == bool(one)
            assert float(sum((p * p).sum() for p in params.values())) <= (diameter / 2) ** 2 * (
                1 + 1e-6
            )
    assert diameter is None or bool(moved.any())


UPDATES = {"apply", "update", "optimize"}  # what dplab.training.step offers to change parameters


def step_takers(root: Path) -> list[str]:
    """Modules under ``root`` (a package tree) that import a parameter update of dplab.training.step
    (or the module itself), but step.py: where training steps could be taken
    outside the one loop."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() == "training/step.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names}
                hit = (node.module == "dplab.training.step" and names & UPDATES) or (
                    node.module == "dplab.training" and "step" in names
                )
            else:
                hit = isinstance(node, ast.Import) and any(
                    a.name == "dplab.training.step" for a in node.names
                )
            if hit:
                found.append(path.relative_to(root).as_posix())
    return found


def test_only_the_one_loop_takes_steps(tmp_path):
    """loop.train and the audit's lockstep runs both step through loop.steps; the CUDA graph of
    that step (training/graphed.py, replayed by loop.steps) captures the same apply."""
    assert step_takers(Path(dplab.__file__).parent) == ["training/graphed.py", "training/loop.py"]
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "runner.py").write_text(
        "from dplab.training.step import denominator, update\n"
    )
    (tmp_path / "figures.py").write_text("import dplab.training.step as s\n")
    assert step_takers(tmp_path) == ["audit/runner.py", "figures.py"]
