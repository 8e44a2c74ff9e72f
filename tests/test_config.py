"""Config validation: schema (keys, types, ranges, defaults) and cross-references."""

from __future__ import annotations

import copy
import re

import pytest

from conftest import ROOT, run
from dplab.config import load_config, read_config
from dplab.schemas import load_yaml, validate
from dplab.errors import DPLabError

DEFAULT = load_yaml(ROOT / "config" / "config.yaml")


def test_default_config_is_valid_and_defaults_are_filled():
    config = validate(copy.deepcopy(DEFAULT))
    assert config["seed"] == DEFAULT.get("seed", 0)
    assert all("points" in entry for entry in config["sweeps"].values())


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c.update(bogus=1), "bogus"),
        (lambda c: c.update(seed=-1), "seed"),
        (lambda c: c.update(threads="two"), "threads"),
        (lambda c: c["sweeps"]["dp_sgd"].update(points=1), "sweeps.dp_sgd.points"),
        (lambda c: c["sweeps"]["dp_sgd"].update(accountants=[]), "sweeps.dp_sgd.accountants"),
        (lambda c: c["datasets"]["digits"].update(kind="cifar"), "datasets.digits.kind"),
        (
            lambda c: c["datasets"]["digits"].update(test_fraction=2),
            "datasets.digits.test_fraction",
        ),
        (lambda c: c["datasets"]["digits"].update(train_size=10), "datasets.digits.train_size"),
        (lambda c: c["runs"]["dp_sgd"].update(lr=0), "runs.dp_sgd.lr"),
        (lambda c: c["runs"]["dp_sgd"].update(delta=1.5), "runs.dp_sgd.delta"),
        (lambda c: c["training_resources"].update(gpus=-1), "training_resources.gpus"),
        (lambda c: c["training_resources"].update(runtime=0), "training_resources.runtime"),
        (lambda c: c["training_resources"].update(gpu=1), "training_resources.gpu"),
        # 3.0 is an integer to JSON Schema, but a count must reach the code as an int
        (lambda c: c["runs"]["try3_dp_sgd"].update(hidden=128.0), "runs.try3_dp_sgd.hidden"),
        (lambda c: c["grids"]["mf_vs_dpsgd"].update(seeds=[0, 1.0]), "grids.mf_vs_dpsgd.seeds[1]"),
        # a name is a folder and a rule: "r1\n" passed Python's `$` and trained into runs/r1
        (lambda c: c["runs"].update({"dp_sgd\n": c["runs"]["dp_sgd"]}), "runs"),
        # YAML's 2024: and on: are an int and a bool, which name patterns do not check
        (lambda c: c["datasets"].update({2024: c["datasets"]["digits"]}), "datasets.2024"),
        (lambda c: c["grids"].update({True: c["grids"]["mf_vs_dpsgd"]}), "grids.True"),
        (lambda c: c.update(threads=100_000), "threads"),  # dplab train refuses > 1024
        # a model file of the project: no path out of it, nothing a shell splits
        (lambda c: c["runs"]["dp_sgd"].update(model="../x.py:Net"), "runs.dp_sgd.model"),
        (lambda c: c["runs"]["dp_sgd"].update(model="/tmp/x.py:Net"), "runs.dp_sgd.model"),
        (lambda c: c["runs"]["dp_sgd"].update(model="my net.py:Net"), "runs.dp_sgd.model"),
        # 1e300 overflowed float32 in the canary's features: "training diverged … lower lr"
        (
            lambda c: c["audits"]["digits_input_canary"].update(canary_norm=1e300),
            "audits.digits_input_canary.canary_norm",
        ),
    ],
)
def test_schema_errors_name_the_key(mutate, key):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    with pytest.raises(DPLabError) as err:
        validate(config)
    assert err.value.key == key


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["sweeps"]["dp_sgd"].update(run="nope"), "sweeps.dp_sgd.run"),
        (lambda c: c["sweeps"]["dp_sgd"].update(accountants=["nope"]), "sweeps.dp_sgd.accountants"),
        (lambda c: c["runs"]["dp_sgd"].update(dataset="nope"), "runs.dp_sgd.dataset"),
        (
            lambda c: c["runs"]["dp_sgd"].update(method="adam"),
            "runs.dp_sgd.method",
        ),  # the method registry
    ],
)
def test_dangling_references_name_the_key(tmp_path, mutate, key):
    config = copy.deepcopy(DEFAULT)
    mutate(config)
    path = tmp_path / "c.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config))
    with pytest.raises(DPLabError) as err:
        load_config(path)
    assert err.value.key == key


@pytest.mark.parametrize(
    "gpus, device, where",
    [
        (0, "cuda", ("runs", "dp_sgd")),
        (1, "cpu", ("runs", "dp_sgd")),
        (0, "cuda", ("grids", "mf_vs_dpsgd", "variants", "dp_mf")),
        (1, "cpu", ("grids", "mf_vs_dpsgd", "base")),
        (0, "cuda", ("audits", "digits_white_box", "run")),
        (1, "cpu", ("audits", "digits_last_iterate_convex", "methods", "dp_sgd_fixed_batches")),
    ],
)
def test_a_run_device_must_agree_with_the_gpus_training_jobs_ask_for(tmp_path, gpus, device, where):
    """training_resources.gpus decides for every training job, an audit's lockstep runs too:
    device cuda needs it >= 1 (or the job gets no GPU on a cluster), device cpu needs 0 (or the
    job holds GPUs it never uses)."""
    import yaml

    config = copy.deepcopy(DEFAULT)
    config["training_resources"]["gpus"] = gpus
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    load_config(path)  # every run says device auto (the default): fine with either
    entry = config
    for key in where:
        entry = entry[key]
    entry["device"] = device
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(DPLabError) as err:
        load_config(path)
    assert err.value.key == ".".join(where) + ".device" and "training_resources.gpus" in str(
        err.value
    )
    entry["device"] = "auto" if device == "cpu" else "cuda"
    config["training_resources"]["gpus"] = 1
    path.write_text(yaml.safe_dump(config))
    load_config(path)


def test_a_json_config_is_read_as_json_as_snakemake_reads_it(tmp_path):
    """Snakemake reads a config file as JSON first: its ``1e-3`` is a number, where YAML 1.1 reads
    it as text (check-config refused what Snakemake ran)."""
    import json

    config = copy.deepcopy(DEFAULT)
    config["runs"]["dp_sgd"]["delta"] = 1e-3
    text = json.dumps(config).replace('"delta": 0.001', '"delta": 1e-3', 1)
    assert '"delta": 1e-3' in text
    (tmp_path / "c.json").write_text(text)
    assert read_config(tmp_path / "c.json")["runs"]["dp_sgd"]["delta"] == 1e-3
    (tmp_path / "d.json").write_text(text.replace('{"seed"', '{"seed": 1, "seed"', 1))
    with pytest.raises(DPLabError, match="seed.*twice|twice.*seed"):
        read_config(tmp_path / "d.json")


@pytest.mark.parametrize(
    "old, new, says",
    [
        ("delta: 1.0e-6, log_every: 20}", "delta: 1e-6, log_every: 20}", "write 1.0e-6"),
        ("delta: 1.0e-6, log_every: 20}", "delta: 1.0e6, log_every: 20}", "write 1.0e+6"),
        ("steps: 200, batch_size: 7", "steps: 2e2, batch_size: 7", "write 200"),
    ],
)
def test_a_number_yaml_reads_as_text_is_refused_saying_how_to_write_it(tmp_path, old, new, says):
    text = (ROOT / "config" / "config.yaml").read_text()
    assert text.count(old) == 1
    (tmp_path / "c.yaml").write_text(text.replace(old, new))
    with pytest.raises(DPLabError, match=re.escape(says)) as err:
        load_config(tmp_path / "c.yaml")
    assert err.value.key == "grids.mf_vs_dpsgd.base." + new.split(":")[0]


def test_snakemake_refuses_a_bad_config_before_any_job(project):
    config = project / "config" / "config.yaml"
    config.write_text(config.read_text().replace("lr: 0.5", "lr: -0.5", 1))
    proc = run(["snakemake", "--cores", "1"], cwd=project, check=False)
    assert proc.returncode != 0
    assert "lr" in proc.stderr + proc.stdout
    assert not (project / "results").exists()


def _small(mutate) -> dict:
    from conftest import small_config

    config = small_config()
    mutate(config)
    return validate(config)


SYNTHETIC = {"kind": "synthetic", "train_size": 1000, "test_size": 100, "dim": 10}
#: a regularized run calibrated with 001 Thm 3, which gives it no ε at any σ
#: (config.yaml's privacy_utility note)
REGULARIZED = {
    "method": "regularized_dp_sgd",
    "model": "logreg",
    "dataset": "synthetic",
    "regularization": 0.1,
    "neighbouring": "replace_one",
    "batch_size": 50,
    "steps": 200,
    "lr": 0.5,
    "clip": 3.0,
    "target_epsilon": 1.0,
    "delta": 1.0e-5,
    "accountant": "asoodeh_regularized",
}
MF = ("grids", "mf_vs_dpsgd")

#: (mistake, key named): each passed `snakemake -n` and failed only inside a job before planning ran
#: the checks of `dplab train` (resolve_run, dp_mf.resolve, the claims), of the
#: data and of the calibration
LATE_MISTAKES = [
    (lambda c: c["runs"]["dp_sgd"].update(diameter=1.0), "runs.dp_sgd.diameter"),
    (lambda c: c["runs"]["dp_sgd"].update(sampling="full_batch"), "runs.dp_sgd.sampling"),
    (lambda c: c["runs"]["gd_nonprivate"].update(l2=0.1), "runs.gd_nonprivate.l2"),
    (lambda c: c["runs"]["dp_sgd"].update(noise_multiplier=1.0), "runs.dp_sgd.noise_multiplier"),
    (lambda c: c["runs"]["dp_sgd"].update(reshuffle=True), "runs.dp_sgd.reshuffle"),
    (lambda c: c["runs"]["dp_sgd"].update(regularization=0.1), "runs.dp_sgd.regularization"),
    (
        lambda c: c["runs"]["nonprivate"].update(noise_multiplier=1.0),
        "runs.nonprivate.noise_multiplier",
    ),
    (lambda c: c["runs"]["dp_sgd"].update(accountant="mf"), "runs.dp_sgd.accountant"),
    (lambda c: c["runs"]["dp_sgd"].update(accountants=["pld", "nope"]), "runs.dp_sgd.accountants"),
    (
        lambda c: c["runs"]["dp_sgd"].update(batch_size=1438),
        "runs.dp_sgd.batch_size",
    ),  # digits: 1437 records
    # add_remove where one record more or less changes ⌊n/b⌋ (1437 = 3·479 =
    # 2·719 − 1): no upper bound holds
    (
        lambda c: c["runs"]["dp_sgd"].update(
            sampling="balls_in_bins", batch_size=479, accountant="balls_in_bins"
        ),
        "runs.dp_sgd.batch_size",
    ),
    (
        lambda c: c["runs"]["dp_sgd"].update(
            sampling="shuffle",
            batch_size=719,
            accountant="fixed_batches",
            noise_multiplier=1.0,
            target_epsilon=None,
        ),
        "runs.dp_sgd.batch_size",
    ),
    (lambda c: c["datasets"]["digits"].update(test_fraction=0.99), "runs.nonprivate.batch_size"),
    (
        lambda c: (
            c["datasets"].update(synthetic=SYNTHETIC),
            c["runs"]["dp_sgd"].update(model="cnn", dataset="synthetic"),
        ),
        "runs.dp_sgd.model",
    ),
    (lambda c: c["runs"]["dp_sgd"].update(accountant="pabi"), "runs.dp_sgd.accountant"),
    (
        lambda c: c["runs"]["dp_sgd"].update(accountant="rdp", neighbouring="replace_one"),
        "runs.dp_sgd.accountant",
    ),
    (
        lambda c: (c["datasets"].update(synthetic=SYNTHETIC), c["runs"].update(reg=REGULARIZED)),
        "runs.reg.target_epsilon",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_sgd"].update(accountants=["nope"]),
        "grids.mf_vs_dpsgd.variants.dp_sgd.accountants",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_sgd"].update(strategy="banded"),
        "grids.mf_vs_dpsgd.variants.dp_sgd.strategy",
    ),
    # 12 × 1000 seeds: 12,000 runs, planned for minutes before any job
    (
        lambda c: c["grids"]["mf_vs_dpsgd"].update(
            seeds=list(range(1000)), target_epsilon=[1.0 + k for k in range(6)]
        ),
        "grids.mf_vs_dpsgd",
    ),
    # a grid's axis replaced these without a word (the run trained at the axis's value)
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["base"].update(target_epsilon=5.0),
        "grids.mf_vs_dpsgd.base.target_epsilon",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_sgd"].update(seed=7),
        "grids.mf_vs_dpsgd.variants.dp_sgd.seed",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["base"].update(diameter=1.0),
        "grids.mf_vs_dpsgd.base.diameter",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_sgd"].update(dataset="nope"),
        "grids.mf_vs_dpsgd.variants.dp_sgd.dataset",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"].update(sgd={"method": "sgd"}),
        "grids.mf_vs_dpsgd.target_epsilon",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"].update(sampling="min_separation"),
        "grids.mf_vs_dpsgd.base.batch_size",
    ),  # 16 partitions of 1437 records hold 89.8, not 7
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"].update(participations=7),
        "grids.mf_vs_dpsgd.variants.dp_mf.participations",
    ),
    # add_remove with b = ⌊n/batch_size⌋ from n where n ± 1 changes it (1437 = 3·479): all move
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"].update(
            min_separation=None, batch_size=479, bands=3
        ),
        "grids.mf_vs_dpsgd.variants.dp_mf.min_separation",
    ),
    # what the MF accountant or the factorization refused in the job, after data and factorization
    # jobs ran: amplified BandMF under replace_one, a dense C over 16 partitions, banded with
    # bands > b where b = ⌊1437/102⌋ = 14 is taken from n
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"].update(neighbouring="replace_one"),
        "grids.mf_vs_dpsgd.variants.dp_mf.neighbouring",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"].update(
            strategy="sqrt", bands=None
        ),
        "grids.mf_vs_dpsgd.variants.dp_mf.strategy",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_mf"].update(
            sampling="min_separation", min_separation=None, batch_size=102
        ),
        "grids.mf_vs_dpsgd.variants.dp_mf.bands",
    ),
    (
        lambda c: c["audits"]["digits_white_box"]["methods"].update(projected_dp_sgd={}),
        "audits.digits_white_box.methods.projected_dp_sgd.diameter",
    ),
    (
        lambda c: c["audits"]["digits_white_box"]["run"].update(bogus=1),
        "audits.digits_white_box.run.bogus",
    ),
    (
        lambda c: c["audits"]["digits_white_box"]["run"].update(lr=-1),
        "audits.digits_white_box.run.lr",
    ),
    (
        lambda c: c["audits"]["digits_white_box"].update(dataset_size=3000),
        "audits.digits_white_box.dataset_size",
    ),
    (
        lambda c: c["audits"]["digits_white_box"].update(canary_label=10),
        "audits.digits_white_box.canary_label",
    ),
    (
        lambda c: c["audits"]["digits_white_box"].update(dataset_size=1024),
        "audits.digits_white_box.dataset_size",
    ),
    (lambda c: c["sweeps"]["dp_sgd"].update(run="nonprivate"), "sweeps.dp_sgd.run"),
    # YAML's .inf/.nan (JSON schema's minimum lets +inf through), pld's δ range, an audit
    # of data without a feature that is 0 in every record, an audit's size
    (
        lambda c: c["audits"]["digits_white_box"]["run"].update(lr=float("inf")),
        "audits.digits_white_box.run.lr",
    ),
    (lambda c: c["runs"]["nonprivate"].update(lr=float("nan")), "runs.nonprivate.lr"),
    (lambda c: c["runs"]["dp_sgd"].update(delta=1e-300), "runs.dp_sgd.delta"),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["base"].update(delta=1e-300),
        "grids.mf_vs_dpsgd.base.delta",
    ),
    (
        lambda c: (
            c["datasets"].update(synthetic={**SYNTHETIC, "train_size": 2000}),
            c["audits"]["digits_white_box"].update(dataset="synthetic"),
        ),
        "audits.digits_white_box.dataset",
    ),
    (
        lambda c: c["audits"]["digits_white_box"].update(runs=10**6, steps=[1, 100_000]),
        "audits.digits_white_box.runs",
    ),
    # an input canary and its mirror share a slot: replace-one, whatever the entry says
    (
        lambda c: c["audits"]["digits_white_box"].update(
            threat_model="input_canary", neighbouring="add_remove"
        ),
        "audits.digits_white_box.neighbouring",
    ),
    # an estimator that gives no row (one canary, or an input canary: no gdp)
    (
        lambda c: c["audits"]["digits_white_box"].update(
            threat_model="input_canary", estimators=["gdp"]
        ),
        "audits.digits_white_box.estimators",
    ),
    (
        lambda c: c["audits"]["digits_white_box"].update(
            canaries=1, estimators=["clopper_pearson", "one_run"]
        ),
        "audits.digits_white_box.estimators",
    ),
    # found by mutating the shipped config at random: an internal error (a grid's run named
    # before its keys were checked), a σ the grid dropped unsaid, an audit's batch larger than
    # its records (refused only by the job), ln of a negative number
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["base"].update(model=1.5),
        "grids.mf_vs_dpsgd.base.model",
    ),
    (
        lambda c: c["grids"]["mf_vs_dpsgd"]["variants"]["dp_sgd"].update(noise_multiplier=2.0),
        "grids.mf_vs_dpsgd.variants.dp_sgd.noise_multiplier",
    ),
    (
        lambda c: c["audits"]["digits_white_box"]["run"].update(batch_size=1041),
        "audits.digits_white_box.run.batch_size",
    ),
    (
        lambda c: (
            c["runs"].update(
                risk_by_epsilon={**DEFAULT["runs"]["risk_by_epsilon"], "delta": 0.045},
                risk_by_risk=DEFAULT["runs"]["risk_by_risk"],
            ),
            c["figures"].update(risk_calibration=DEFAULT["figures"]["risk_calibration"]),
        ),
        "figures.risk_calibration.by_epsilon",
    ),
]


@pytest.mark.parametrize("mutate, key", LATE_MISTAKES)
def test_every_check_of_a_job_runs_before_planning(mutate, key):
    config = _small(lambda c: None)
    pipeline_check(config)  # the small config itself passes
    with pytest.raises(DPLabError) as err:
        pipeline_check(_small(mutate))
    assert err.value.key == key and "\n" not in str(err.value)


def pipeline_check(config: dict) -> None:
    from dplab.config import check_config

    check_config(config)


@pytest.mark.parametrize(
    "mutate, key", [case for case in LATE_MISTAKES[:9] if case[1].startswith("runs.dp_sgd.")]
)
def test_dplab_train_refuses_the_same_key(tmp_path, capsys, mutate, key):
    """What planning refuses is what the job's `dplab train` would refuse (same key, exit 2): the
    first mistakes, which `dplab train` refuses from the run alone, before it reads any data."""
    import json

    from dplab import entries
    from dplab.cli import main

    raw = copy.deepcopy(_small(lambda c: None))
    mutate(raw)
    entry = entries.run_entry(validate(raw), "dp_sgd")
    code = main(
        [
            "train",
            "--run-json",
            json.dumps(entry),
            "--data",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and f"error: {key.removeprefix('runs.dp_sgd.')}:" in capsys.readouterr().err


def test_a_target_epsilon_above_the_accountants_floor_passes():
    """Planning refuses a calibration only where it cannot succeed: the same regularized run with
    its natural accountant, and a projected run calibrated with 001 Thm 1 (ε → 0 as σ grows)."""
    pipeline_check(
        _small(
            lambda c: (
                c["datasets"].update(synthetic=SYNTHETIC),
                c["runs"].update(reg={**REGULARIZED, "accountant": "rdp"}),
            )
        )
    )
    projected = {
        **REGULARIZED,
        "method": "projected_dp_sgd",
        "regularization": None,
        "diameter": 8.0,
        "accountant": "asoodeh_projected",
    }
    pipeline_check(
        _small(
            lambda c: (c["datasets"].update(synthetic=SYNTHETIC), c["runs"].update(proj=projected))
        )
    )


def test_the_shipped_configs_pass_every_check():
    """config.yaml, paper.yaml (`--configfile` replaces config.yaml) and
    paper-smoke.yaml merged over it."""
    assert load_config(ROOT / "config" / "config.yaml")["runs"]
    assert "mnist_gd_nonprivate" in load_config(ROOT / "config" / "paper.yaml")["runs"]
    assert (
        "mnist_gd_nonprivate"
        in load_config(ROOT / "config" / "paper.yaml", ROOT / "config" / "paper-smoke.yaml")["runs"]
    )


def test_check_config_counts_every_training_run_and_job(capsys):
    """It printed the `train` rule's jobs as "training runs" (14), leaving out every grid's runs
    (105 in 29 jobs with group_runs: seed)."""
    from dplab import entries, jobs
    from dplab.cli import main

    config = read_config(ROOT / "config" / "config.yaml")
    plan = jobs.plan(config)
    runs = len(config["runs"]) + sum(len(entries.grid_runs(config, g)) for g in config["grids"])
    training = [j for j in plan.jobs if isinstance(j, (jobs.RunJob, jobs.RunsJob))]
    assert main(["check-config", str(ROOT / "config" / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert f"({runs} training runs in {len(training)} jobs," in out
    assert len(plan.of("train")) < len(training) < runs


def test_snakemake_names_the_key_of_a_job_level_mistake_in_one_line(project):
    """`snakemake -n` stops before planning with one line and exit code 2: a cross-key rule of
    `dplab train` (diameter on dp_sgd), an unknown key (Snakemake's validate() printed the whole
    schema, 1443 lines), and a YAML syntax error (Snakemake says neither line nor column)."""
    path = project / "config" / "config.yaml"
    text = path.read_text()
    for bad, expected in [
        (
            text.replace("method: dp_sgd", "method: dp_sgd\n    diameter: 1.0", 1),
            "config error: runs.dp_sgd.diameter: method dp_sgd has no projection",
        ),
        (text.replace("seed: 0", "seed: 0\nbogus: 1", 1), "config error: bogus: unknown key"),
        (
            text.replace("seed: 0", "seed: [0", 1),
            "config error: config/config.yaml: not valid YAML: line 2, column 8:",
        ),
    ]:
        assert bad != text
        path.write_text(bad)
        proc = run(["snakemake", "-n", "--quiet"], cwd=project, check=False)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(
            expected
        ), proc.stderr
    assert not (project / "results").exists()


@pytest.mark.parametrize(
    "change, says",
    [
        ({"target_epsilon": None, "noise_multiplier": 1.0}, "run 'try3_dp_sgd' sets no target_eps"),
        ({"target_epsilon": 2.0}, "try3_dp_sgd: ε=2, δ=1e-06"),
        ({"delta": 1e-5}, "try3_dp_sgd: ε=1, δ=1e-05"),
    ],
)
def test_the_training_tries_are_compared_at_one_target(change, says):
    """dp_training_tries draws its tries at one calibrated (ε, δ) (its title names it): a try whose
    σ is given, or calibrated to another target, is refused where the config is checked."""
    from dplab.config import check_config

    raw = load_yaml(ROOT / "config" / "config.yaml")
    check_config(validate(copy.deepcopy(raw)))  # the default config's tries share (1, 1e-6)
    raw["runs"]["try3_dp_sgd"].update(change)
    with pytest.raises(DPLabError) as err:
        check_config(validate(raw))
    assert err.value.key == "figures.dp_training_tries.tries" and says in err.value.message


COLLIDING = """
group_runs: seed
datasets:
  d: {kind: digits}
  b_d: {kind: digits}
runs:
  r1: {method: sgd, model: logreg, dataset: d, steps: 20, batch_size: 64}
grids:
  a_b:
    base: {method: dp_sgd, model: logreg, dataset: d, steps: 20, batch_size: 64}
    variants: {dp_sgd: {}}
    target_epsilon: [1.0, 1.0000001]
    seeds: [0, 1]
"""


def test_grid_runs_that_would_share_a_folder_or_a_rule_are_refused(tmp_path):
    """ε 1.0 and 1.0000001 both print eps1 (the second run was dropped); grid a_b on dataset d
    and grid a on dataset b_d both map to the rule train_runs__grids_a_b_d_… (Snakemake failed)."""
    from dplab import jobs

    path = tmp_path / "c.yaml"
    path.write_text(COLLIDING)
    with pytest.raises(DPLabError, match="get the same folder d/logreg/dp_sgd/eps1/seed0") as err:
        jobs.plan(read_config(path))
    assert err.value.key == "grids.a_b"
    grid_a = (
        "  a:\n    base: {method: dp_sgd, model: logreg, dataset: b_d, steps: 20, batch_size: 64}\n"
    )
    grid_a += "    variants: {dp_sgd: {}}\n    target_epsilon: [1.0]\n    seeds: [0, 1]\n"
    path.write_text(COLLIDING.replace("[1.0, 1.0000001]", "[1.0]") + grid_a)
    with pytest.raises(DPLabError, match="same Snakemake rule name train_runs__grids_a_b_d_"):
        jobs.plan(read_config(path))
    path.write_text(
        COLLIDING.replace("[1.0, 1.0000001]", "[1.0, 2.0]") + grid_a.replace("b_d", "d")
    )
    assert len(jobs.plan(read_config(path)).of("train_runs")) == 3


def test_names_that_differ_only_in_case_are_refused():
    """runs DP_sgd and dp_sgd write results/runs/DP_sgd and results/runs/dp_sgd: one folder on a
    case-insensitive file system (macOS, Windows), where one run's results overwrote the other's."""
    from dplab import jobs

    config = copy.deepcopy(DEFAULT)
    config["runs"]["DP_sgd"] = copy.deepcopy(config["runs"]["dp_sgd"])
    with pytest.raises(DPLabError, match="results/runs/(dp|DP)_sgd/.* only in case") as err:
        jobs.plan(validate(config))
    assert {err.value.key, str(err.value).split("(")[1].split(")")[0]} == {
        "runs.dp_sgd",
        "runs.DP_sgd",
    }
    config["runs"]["DP_sgd2"] = config["runs"].pop("DP_sgd")
    jobs.plan(validate(config))
