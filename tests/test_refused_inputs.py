"""Inputs refused before any work: a key given twice in a YAML file, files that are
not whole (cut, empty, a FIFO, a device), counts too large to compute, flags an accountant never
reads, two outputs on one path, an index over missing results.  Each is refused with one line
naming the key, flag or file, exit code 2, before any work (dplab.inputs, dplab.schemas)."""

import json
import os
import time

import pytest
import yaml

from conftest import ROOT, run
from probe import refused
from dplab import accounting
from dplab.accounting.eligibility import defaults
from dplab.accounting.setting import Setting
from dplab.cli import main
from dplab.commands.accounting import PROBE, proved_for
from dplab.errors import DPLabError


# ------------------------------------------------------------------ 1. duplicate YAML keys

#: a config whose second `dp_sgd` entry (a non-private sgd run) silently replaced the first
DUPLICATE_RUN = """seed: 0
runs:
  dp_sgd:
    method: dp_sgd
    dataset: digits
  dp_sgd:
    method: sgd
    dataset: digits
"""


def test_a_run_entry_given_twice_names_the_key_and_both_lines(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(DUPLICATE_RUN)
    line = refused(["check-config", str(path)], capsys)
    assert "key 'dp_sgd' given twice, at line 3 and line 6" in line and str(path) in line


def test_a_key_given_twice_inside_a_run_file_is_refused(tmp_path, capsys):
    """A single-run YAML of `dplab train`: refused before any data are read."""
    path = tmp_path / "run.yaml"
    path.write_text("method: dp_sgd\ndataset: digits\nlr: 0.5\nsteps: 10\nlr: 50\n")
    line = refused(
        [
            "train",
            "--config",
            str(path),
            "--data",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
    )
    assert "key 'lr' given twice, at line 3 and line 5" in line
    assert not (tmp_path / "o").exists()


def test_a_merge_key_may_still_be_overridden(tmp_path):
    """YAML's merge key (<<: *anchor) brings keys a mapping may override: not a duplicate."""
    from dplab.schemas import load_yaml

    path = tmp_path / "anchors.yaml"
    path.write_text("base: &b {lr: 0.5, steps: 10}\nrun:\n  <<: *b\n  lr: 0.1\n")
    assert load_yaml(path)["run"] == {"lr": 0.1, "steps": 10}


def test_snakemake_refuses_a_configfile_with_a_key_given_twice(project):
    """Snakemake's own --configfile loader keeps the last key: the Snakefile reads the file
    again."""
    text = (project / "config" / "config.yaml").read_text()
    bad = project / "dup.yaml"
    bad.write_text(text.replace("\nruns:\n", "\nruns:\n  dp_sgd:\n    method: sgd\n", 1))
    proc = run(["snakemake", "-n", "--quiet", "--configfile", "dup.yaml"], cwd=project, check=False)
    first, second = _line_of(bad, "  dp_sgd:", 1), _line_of(bad, "  dp_sgd:", 2)
    assert proc.returncode == 2
    message = proc.stderr.strip()
    assert message.startswith("config error: ") and "\n" not in message
    assert message.endswith(
        f"dup.yaml: key 'dp_sgd' given twice, at line {first} and line {second}; keep one"
    )
    assert not (project / "results").exists()


def test_snakemake_refuses_a_config_key_given_twice_on_its_command_line(project):
    """`snakemake --config seed=1 seed=2` planned with seed=2: the Snakefile refuses it
    (config.check_command_line; its other cases below), one line, exit 2, nothing planned."""
    proc = run(
        ["snakemake", "-n", "--quiet", "--config", "seed=1", "seed=2"], cwd=project, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "config error: --config seed: given twice (seed=1 and seed=2): the last would "
        "silently win; give it once"
    )
    assert not (project / "results").exists()
    # a --configfile is not a --config: its entries are the file's own (Snakemake's
    # overwrite_config holds both; only the --config pairs are checked against the files)
    proc = run(
        ["snakemake", "-n", "--quiet", "--configfile", "config/config.yaml"],
        cwd=project,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "argv, overrides, expected",
    [
        (
            ["snakemake", "--config", "seed=1", "--config", "threads=1"],
            {"threads": 1},
            "--config: given 2 times: Snakemake keeps only the last one's values, dropping "
            "seed=1; give them all after one --config",
        ),
        (
            ["snakemake", "-n", "--configfile", "a.yaml", "--configfile=b.yaml"],
            {},
            "--configfile: given 2 times: Snakemake keeps only the last one's values, dropping "
            "a.yaml",
        ),
        (
            ["snakemake", "-C", "seed_map={'a': 1, 'a': 2}"],
            {},
            "--config seed_map: key 'a' given twice; keep one",
        ),
        (
            ["snakemake", "--config", "runs={'dp_sgd': {'method': 'sgd'}}"],
            {"runs": {"dp_sgd": {"method": "sgd"}}},
            "--config runs.dp_sgd: is an entry of the config file too: Snakemake would merge the "
            "two key by key",
        ),
    ],
)
def test_a_command_line_config_snakemake_would_resolve_silently_is_refused(
    argv, overrides, expected
):
    """Snakemake keeps the last of two --config (or --configfile) lists, the last of a key given
    twice inside a mapping, and merges a --config entry key by key into the file's entry of that
    name (a dp_sgd run turned `method: sgd` keeps its noise)."""
    from dplab.errors import DPLabError
    from dplab.config import check_command_line

    with pytest.raises(DPLabError) as err:
        check_command_line(argv, overrides, {"seed": 0, "runs": {"dp_sgd": {"method": "dp_sgd"}}})
    assert str(err.value).startswith(expected)


@pytest.mark.parametrize(
    "argv",
    [
        [
            "snakemake",
            "-n",
            "--config",
            "seed=3",
        ],  # a scalar overrides the file: Snakemake's documented use
        ["snakemake", "-n", "--config", "seed=3", "threads=2", "--configfile", "a.yaml", "b.yaml"],
        ["snakemake", "-n", "--config", "runs={'new_run': {'method': 'sgd'}}"],  # a new entry
        [
            "pytest",
            "--config",
            "a=1",
            "--config",
            "a=2",
        ],  # not Snakemake's command line: only the parsed pairs
    ],
)
def test_an_unambiguous_command_line_config_passes(argv):
    from dplab.config import check_command_line

    check_command_line(
        argv,
        {"seed": 3, "runs": {"new_run": {"method": "sgd"}}},
        {"seed": 0, "runs": {"dp_sgd": {}}},
    )


def _line_of(path, text: str, occurrence: int) -> int:
    """The line (from 1) of the ``occurrence``-th line of ``path`` that equals ``text``."""
    lines = [
        i + 1
        for i, line in enumerate(path.read_text().splitlines())
        if line.split("#")[0].rstrip() == text
    ]
    return lines[occurrence - 1]


# ------------------------------------------------------------------ 2. whole-file checks


def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


def _empty(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    return str(path)


NOT_A_FILE = {
    "a FIFO": (_fifo, "is a FIFO, not a regular file"),
    "/dev/zero": (lambda tmp: "/dev/zero", "is a device, not a regular file"),
    "an empty file": (_empty, "is empty"),
}


@pytest.mark.parametrize("kind", NOT_A_FILE)
@pytest.mark.parametrize(
    "command",
    ["check-config", "provenance config", "provenance output", "figure-draw", "sweep summary"],
)
def test_a_file_that_is_not_whole_is_refused_without_reading_it(tmp_path, capsys, kind, command):
    """A FIFO would block and /dev/zero never end (`provenance` read it forever); an empty file
    holds nothing: one line naming the path, before it is read."""
    make, problem = NOT_A_FILE[kind]
    path = make(tmp_path)
    out = str(tmp_path / "out.json")
    argv = {
        "check-config": ["check-config", path],
        "provenance config": ["provenance", "--config", path, "--out", out],
        "provenance output": [
            "provenance",
            "--config",
            str(ROOT / "config" / "config.yaml"),
            "--out",
            out,
            path,
        ],
        "figure-draw": [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            path,
            "--pdf",
            str(tmp_path / "a.pdf"),
            "--png",
            str(tmp_path / "a.png"),
        ],
        "sweep summary": [
            "sweep",
            "--summary",
            path,
            "--accountants",
            "rdp",
            "--out",
            str(tmp_path / "s.csv"),
        ],
    }[command]
    if kind == "an empty file" and command == "provenance output":
        pytest.skip("an empty result file is hashed: it is a file, read to its end")
    start = time.monotonic()
    line = refused(argv, capsys)
    assert time.monotonic() - start < 30
    assert f"{path} {problem}" in line, line
    assert not list(tmp_path.glob("out*")) and not list(tmp_path.glob("a.p*"))


@pytest.fixture(scope="module")
def langevin_table(tmp_path_factory):
    """A figure's table as `dplab figure-table` writes it (langevin_rdp: 0.4 s, no inputs)."""
    from figure_params import default_params

    from dplab.figures import figure
    from dplab.tables import write_table

    path = tmp_path_factory.mktemp("table") / "langevin_rdp.csv"
    write_table(path, figure("langevin_rdp").table({}, default_params("langevin_rdp")))
    return path


def test_a_figure_table_cut_mid_line_is_refused_not_drawn(langevin_table, tmp_path, capsys):
    """figure-draw drew a langevin_rdp table cut at 60 % (its last row half there); the whole
    table draws."""
    cut = tmp_path / "cut.csv"
    raw = langevin_table.read_bytes()
    cut.write_bytes(raw[: len(raw) * 6 // 10])
    assert not cut.read_bytes().endswith(b"\n")
    pdf, png = tmp_path / "f.pdf", tmp_path / "f.png"
    line = refused(
        ["figure-draw", "langevin_rdp", "--table", str(cut), "--pdf", str(pdf), "--png", str(png)],
        capsys,
    )
    assert f"{cut}: table of figure langevin_rdp truncated (its last line is cut" in line
    assert not pdf.exists() and not png.exists()
    assert (
        main(
            [
                "figure-draw",
                "langevin_rdp",
                "--table",
                str(langevin_table),
                "--pdf",
                str(pdf),
                "--png",
                str(png),
            ]
        )
        == 0
    )
    assert pdf.stat().st_size > 0 and png.stat().st_size > 0


def _cut_rows(path, rows: int) -> tuple[int, int]:
    """Drop the last ``rows`` whole lines of the CSV ``path`` (a cut at a line boundary: still valid
    CSV ending with a newline); (rows written, rows left)."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: len(lines) - rows]))
    return len(lines) - 1, len(lines) - 1 - rows


def test_a_figure_table_cut_at_a_line_boundary_is_refused_naming_the_rows(
    langevin_table, tmp_path, capsys
):
    """figure-draw drew a table with its last rows missing (cut exactly after a line): the table
    records its row count (dplab.tables.ROWS), which the reader checks."""
    cut = tmp_path / "cut.csv"
    cut.write_bytes(langevin_table.read_bytes())
    written, left = _cut_rows(cut, 2)
    pdf, png = tmp_path / "f.pdf", tmp_path / "f.png"
    line = refused(
        ["figure-draw", "langevin_rdp", "--table", str(cut), "--pdf", str(pdf), "--png", str(png)],
        capsys,
    )
    assert (
        f"{cut}: table of figure langevin_rdp truncated or altered: {left} rows where its "
        f"writer wrote {written}" in line
    )
    assert not pdf.exists() and not png.exists()
    _cut_rows(cut, left)  # the header alone
    assert "has a header but no rows" in refused(
        ["figure-draw", "langevin_rdp", "--table", str(cut), "--pdf", str(pdf), "--png", str(png)],
        capsys,
    )


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A prepared synthetic dataset and a 6-step dp_sgd run on it (tests/bad_inputs.py's)."""
    import bad_inputs

    work = tmp_path_factory.mktemp("tiny")
    data, _, _ = bad_inputs.prepare(work, lambda argv, timeout: (main(argv), "", 0.0))
    return data, work / "run" / "summary.json"


def test_a_sweep_table_cut_at_a_line_boundary_is_refused(tiny_run, tmp_path, capsys):
    """`dplab sweep` writes the row count; accountants_vs_pld's table refuses the sweep with rows
    missing."""
    _, summary = tiny_run
    sweep = tmp_path / "sweep.csv"
    assert (
        main(
            [
                "sweep",
                "--summary",
                str(summary),
                "--accountants",
                "rdp",
                "pld",
                "--points",
                "3",
                "--out",
                str(sweep),
            ]
        )
        == 0
    )
    written, left = _cut_rows(sweep, 1)
    out = tmp_path / "t.csv"
    line = refused(
        [
            "figure-table",
            "accountants_vs_pld",
            "--params-json",
            '{"sweep": "s"}',
            "--inputs",
            f"sweep={sweep}",
            f"summary={summary}",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert (
        f"{sweep}: sweep table truncated or altered: {left} rows where its writer wrote {written}"
        in line
    )
    assert not out.exists()


def test_an_audit_table_cut_at_a_line_boundary_is_refused(digits_dir, tmp_path, capsys):
    """`dplab audit` writes the row count; tightness_audit's table refuses the audit with rows
    missing."""
    entry = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["audits"][
        "digits_last_iterate_convex"
    ]
    entry = {**entry, "steps": [1], "runs": 4, "seed": 0}
    audit = tmp_path / "audit.csv"
    capsys.readouterr()
    assert (
        main(
            [
                "audit",
                "--audit-json",
                json.dumps(entry),
                "--data",
                str(digits_dir),
                "--out",
                str(audit),
            ]
        )
        == 0
    )
    written, left = _cut_rows(audit, 1)
    out = tmp_path / "t.csv"
    line = refused(
        [
            "figure-table",
            "tightness_audit",
            "--params-json",
            '{"audits": ["a"]}',
            "--inputs",
            f"audits={audit}",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert (
        f"{audit}: audit table truncated or altered: {left} rows where its writer wrote {written}"
        in line
    )
    assert not out.exists()


def test_run_metrics_cut_at_a_line_boundary_are_refused(tmp_path):
    """A run's metrics.csv ends at the run's last step (the loop always logs it): a table cut
    exactly after a line is caught against the summary's steps."""
    from dplab.errors import DPLabError
    from dplab.inputs import run_metrics

    path = tmp_path / "metrics.csv"
    rows = "".join(f"{t},0.5\n" for t in (10, 20, 30, 40))
    path.write_text("step,train_loss\n" + rows)
    assert list(run_metrics(path, 40)["step"]) == [10, 20, 30, 40]
    path.write_text("step,train_loss\n" + rows[: rows.index("40,")])
    with pytest.raises(DPLabError) as err:
        run_metrics(path, 40)
    assert "truncated: its last step is 30, the run's summary says 40" in str(err.value)


# ------------------------------------------------------------------ 3. counts bounded before work


@pytest.mark.slow
def test_pld_at_a_billion_steps_is_answered_in_bounded_time(capsys):
    """σ = 20, q = 1e-4, T = 1e9 ran for ever (dp_accounting computed 3**T exactly), then was
    refused (its composition would hold 1.34e7 bins); the certified read-off's window now holds
    ~1e5 bins of the refined interval: answered in ~3 s of CPU, below rdp's ε."""
    from dplab import accounting

    accounting.get("pld")  # imports dp_accounting before the clock starts
    start = time.process_time()
    argv = [
        "--noise-multiplier",
        "20",
        "--sampling-rate",
        "1e-4",
        "--steps",
        "1000000000",
        "--delta",
        "1e-5",
    ]
    assert main(["epsilon", "--accountant", "pld", *argv]) == 0
    assert time.process_time() - start < 30.0
    pld = json.loads(capsys.readouterr().out)["epsilon"]
    assert main(["epsilon", "--accountant", "rdp", *argv]) == 0
    assert pld <= json.loads(capsys.readouterr().out)["epsilon"]


def test_pld_of_a_sparse_step_is_answered_without_dp_accountings_power():
    """The one-step PMF of σ = 20, q = 1e-4 at dp_accounting's interval 1e-4 has 3 points: its
    sparse self_compose first computes 3**T (T = 1e7: 31 s, T = 1e9: no end).  pld refines the
    interval (a quarter of one step's loss std) and reads the composition off certified
    (pld_tilted): at T = 1e5 its ε is at most dp_accounting's 3-point value and at least the
    certified lower bound of the sum of the outputs, and T = 1e6 is answered too."""
    from dp_accounting.pld import privacy_loss_distribution

    from dplab import accounting
    from dplab.accounting import Setting
    from test_accounting_limits import sum_test_delta

    pld = accounting.get("pld")
    setting = Setting(noise_multiplier=20.0, sampling_rate=1e-4, steps=100_000)
    coarse = privacy_loss_distribution.from_gaussian_mechanism(
        20.0, value_discretization_interval=1e-4, sampling_prob=1e-4
    )
    assert coarse._pmf_remove.size == 3  # noqa: SLF001
    assert pld.one_step(setting)._pmf_remove.size > 3  # noqa: SLF001
    identity = privacy_loss_distribution.identity(value_discretization_interval=1e-4)
    theirs = identity.compose(coarse.self_compose(100_000)).get_epsilon_for_delta(1e-5)
    ours = pld.epsilon(setting, 1e-5)
    assert sum_test_delta(20.0, 1e-4, 100_000, ours) <= 1e-5 and ours <= theirs
    assert 0 < pld.epsilon(setting.replace(steps=1_000_000), 1e-5) < 1


def test_sweep_points_are_bounded_before_the_summary_is_read(tmp_path, capsys):
    line = refused(
        [
            "sweep",
            "--summary",
            str(tmp_path / "none.json"),
            "--accountants",
            "rdp",
            "--points",
            "1000000000",
            "--out",
            str(tmp_path / "s.csv"),
        ],
        capsys,
    )
    assert line.endswith("--points: must be an integer in [2, POINTS_MAX=10000]; got 1000000000")


def test_a_figure_step_count_is_bounded(tmp_path, capsys):
    """sigma_vs_steps calibrated σ at every T given, to 1e9."""
    line = refused(
        [
            "figure-table",
            "sigma_vs_steps",
            "--params-json",
            json.dumps({"steps": [1, 10**9]}),
            "--out",
            str(tmp_path / "t.csv"),
        ],
        capsys,
    )
    assert (
        "figures.sigma_vs_steps.steps[1]: 1000000000 is greater than the maximum of 100000000"
        in line
    )


def _audit_json(**keys) -> str:
    entry = {
        **yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["audits"][
            "digits_white_box"
        ],
        "seed": 0,
        **keys,
    }
    return json.dumps(entry)


@pytest.mark.parametrize(
    "keys, expected",
    [
        ({"runs": 10**9}, "--audit-json.runs: 1000000000 is greater than the maximum of 1048576"),
        (
            {"runs": 10**6, "steps": [1, 100_000]},
            "runs: runs × largest step × dataset_size = 1000000 × 100000 × 1040",
        ),
    ],
)
def test_audit_runs_are_bounded_before_the_data_are_read(tmp_path, capsys, keys, expected):
    line = refused(
        [
            "audit",
            "--audit-json",
            _audit_json(**keys),
            "--data",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "a.csv"),
        ],
        capsys,
    )
    assert expected in line


def test_mf_checks_every_flag_before_it_factorizes(tmp_path, capsys, monkeypatch):
    """`dplab mf` refused --delta 2 or a missing --dataset-size only after the factorization."""
    from dplab.mf import factorizations

    def factorize(*args, **kwargs):
        raise AssertionError("factorized before the flags were checked")

    monkeypatch.setattr(factorizations, "factorize", factorize)
    base = ["mf", "--strategy", "optimal", "--steps", "64"]
    assert "delta" in refused(base + ["--epsilon", "1", "--delta", "2"], capsys)
    assert "epsilon" in refused(base + ["--epsilon", "1e9", "--delta", "1e-6"], capsys)
    banded = [
        "mf",
        "--strategy",
        "banded",
        "--steps",
        "64",
        "--bands",
        "4",
        "--min-separation",
        "8",
    ]
    assert "--dataset-size" in refused(
        banded + ["--epsilon", "1", "--delta", "1e-6", "--sampling", "cyclic_poisson"], capsys
    )
    assert "participations" in refused(
        base
        + ["--epsilon", "1", "--delta", "1e-6", "--min-separation", "8", "--participations", "3"],
        capsys,
    )
    assert "strategy" in refused(["mf", "--strategy", "nope", "--steps", "64"], capsys)


# ------------------------------------------------------------------ 5. every flag accepted is used

SETTING = [
    "--noise-multiplier",
    "1",
    "--sampling-rate",
    "0.01",
    "--steps",
    "100",
    "--delta",
    "1e-5",
]


@pytest.mark.parametrize(
    "accountant, flag",
    [
        ("rdp", "--sensitivity"),
        ("pld", "--sensitivity"),
        ("pld", "--alpha"),
        ("moments", "--alpha"),
        ("rdp", "--clip"),
        ("rdp", "--lr"),
        ("pld", "--dimension"),
        ("pld", "--diameter"),
        ("rdp", "--lipschitz"),
        ("moments", "--strong-convexity"),
    ],
)
def test_a_setting_flag_the_accountant_never_reads_is_refused(capsys, accountant, flag):
    """rdp with --sensitivity 3 (or --clip, --lr, --dimension …) printed the ε of rdp without it."""
    line = refused(["epsilon", "--accountant", accountant, *SETTING, flag, "3"], capsys)
    assert f"{flag}: accountant '{accountant}' does not read it" in line


def test_sigma_reads_clip_for_the_noise_std(capsys):
    """``sigma --clip C`` prints the noise std σ·C on the clipped sum: the command reads --clip."""
    capsys.readouterr()
    assert (
        main(
            [
                "sigma",
                "--accountant",
                "rdp",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--clip",
                "2",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["noise_std"] == pytest.approx(2 * out["noise_multiplier"], rel=1e-12)


@pytest.mark.parametrize("name", defaults())
def test_a_field_an_accountant_does_not_read_leaves_its_answer_unchanged(name):
    """The table behind the refusals (``Accountant.unused``, the complement of requires, excludes
    and reads) is true of the code: each unused field, set on a setting the accountant accepts,
    gives the same δ at ε = 1 to the last bit."""
    acc = accounting.get(name)
    sampling, relations = next(iter(proved_for(acc).items()))
    keys = set(acc.requires) | (
        {"dataset_size", "batch_size"} if "sampling_rate" in acc.requires else set()
    )
    fields = {key: PROBE[key] for key in keys if key in PROBE}
    if sampling == "full_batch" and "batch_size" in fields:
        fields["batch_size"] = fields["dataset_size"]
    base = Setting(sampling=sampling, neighbouring=relations[0], **fields)
    try:
        acc.check(base)
    except DPLabError:  # the fixed-batch bounds refuse add_remove at n mod b = 0 (pabi needs b | n)
        base = base.replace(dataset_size=base.dataset_size + 1, sampling_rate=None)
    values = {**PROBE, "alpha": 3.0}
    delta = acc.delta(base, 0.5)
    for field in acc.unused:
        assert acc.delta(base.replace(**{field: values[field]}), 0.5) == delta, field


def test_gaussian_calibrations_refuse_training_constants(capsys):
    line = refused(
        [
            "sigma",
            "--accountant",
            "gaussian_analytic",
            "--sensitivity",
            "1",
            "--clip",
            "2",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
        ],
        capsys,
    )
    assert "--clip: accountant 'gaussian_analytic' does not read it" in line


def test_a_flag_an_accountant_reads_changes_its_answer(capsys):
    """The counterpart: rdp_closed_form reads --alpha (its ε at α = 10 differs from the optimum
    over α)."""

    def epsilon(*extra):
        capsys.readouterr()
        assert (
            main(
                [
                    "epsilon",
                    "--accountant",
                    "rdp_closed_form",
                    "--noise-multiplier",
                    "5",
                    "--sampling-rate",
                    "0.01",
                    "--steps",
                    "100",
                    "--delta",
                    "1e-5",
                    *extra,
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out)["epsilon"]

    assert epsilon("--alpha", "10") > epsilon()


def test_figure_draw_refuses_one_path_for_both_outputs(tmp_path, capsys):
    same = tmp_path / "fig"
    line = refused(
        [
            "figure-draw",
            "gaussian_sigma",
            "--table",
            str(tmp_path / "t.csv"),
            "--pdf",
            str(same),
            "--png",
            str(tmp_path / "." / "fig"),
        ],
        capsys,
    )
    assert "--png: is the same file as --pdf" in line and not same.exists()


def test_an_index_over_missing_results_names_them(tmp_path, capsys):
    """A figure whose table exists but not its PNG was listed with a dead link; with --config every
    result of the DAG must exist; an empty results folder was indexed as if complete."""
    results = tmp_path / "results"
    results.mkdir()
    line = refused(
        ["index", "--results", str(results), "--out", str(tmp_path / "index.md")], capsys
    )
    assert (
        f"--results: {results} holds no result files" in line
        and not (tmp_path / "index.md").exists()
    )
    (results / "tables").mkdir(parents=True)
    (results / "figures").mkdir()
    for name in ("tables/gaussian_sigma.csv", "figures/gaussian_sigma.pdf"):
        (results / name).write_text("x\n")
    out = tmp_path / "index.md"
    line = refused(["index", "--results", str(results), "--out", str(out)], capsys)
    assert (
        "1 result(s) missing" in line and "figures/gaussian_sigma.png" in line and not out.exists()
    )
    (results / "figures" / "gaussian_sigma.png").write_text("x\n")
    assert main(["index", "--results", str(results), "--out", str(out)]) == 0
    line = refused(
        [
            "index",
            "--results",
            str(results),
            "--config",
            str(ROOT / "config" / "config.yaml"),
            "--out",
            str(out),
        ],
        capsys,
    )
    assert (
        "result(s) missing" in line
        and "audit/digits_last_iterate_projected.csv" in line
        and " more; " in line
    )


def test_pld_certified_read_off_never_builds_a_window_beyond_its_limit(capsys, monkeypatch):
    """σ = 20, q = 1e-4, T = 3e8 once widened the certified read-off's (pld_tilted) window to the
    whole composed support, 9e8 bins (200 s, ~14 GB) before refusing (that setting is now
    answered, tests/test_accounting_limits.py); σ = 3, q = 0.01, T = 1e9 needs 2.4e7 bins: every
    FFT stays within WINDOW_MAX bins and the setting is refused, naming the limit."""
    from dplab.accounting import pld_tilted

    sizes = []
    rfft = pld_tilted.fft.rfft
    monkeypatch.setattr(
        pld_tilted.fft, "rfft", lambda x, *a, **k: sizes.append(len(x)) or rfft(x, *a, **k)
    )
    line = refused(
        [
            "epsilon",
            "--accountant",
            "pld",
            "--noise-multiplier",
            "3",
            "--sampling-rate",
            "0.01",
            "--steps",
            "1000000000",
            "--delta",
            "1e-5",
        ],
        capsys,
    )
    assert "WINDOW_MAX" in line
    assert max(sizes, default=0) <= pld_tilted.WINDOW_MAX


@pytest.mark.parametrize("key", ["lr", "clip"])
def test_an_exclusion_names_only_keys_the_accountant_reads(key):
    """A dp_sgd run at lr (or clip) = 1e-320 reported "epsilon: none": rdp's exclusion named the
    key, which rdp does not read.  Every accountant's range checks now cover only the keys it
    reads."""
    from dplab.accounting.eligibility import exclusion

    setting = Setting(
        noise_multiplier=8.0,
        sampling_rate=0.01,
        steps=10,
        dataset_size=1000,
        batch_size=10,
        **{key: 1e-320},
    )
    for name in accounting.names():
        why = exclusion(name, setting) or ""
        assert f"{key}:" not in why or key not in accounting.get(name).unused, (name, why)
    assert exclusion("rdp", setting) is None
    assert accounting.get("rdp").epsilon(setting, 1e-5) == accounting.get("rdp").epsilon(
        setting.replace(**{key: None}), 1e-5
    )


# ------------------------------------------------------------------ sweep and figure doors


def _sweep_summary(path, run_fields=None, **fields) -> str:
    """A dp_sgd run's summary.json (σ 1, q 0.1, T 10, δ 1e-5) with ``fields`` replaced, and
    ``run_fields`` in its resolved run."""
    from conftest import summary_json
    from dplab.accounting.eligibility import Update

    run = {"method": "dp_sgd", "dataset": "digits", "steps": 10, "noise_multiplier": 1.0}
    setting = Setting(noise_multiplier=1.0, sampling_rate=0.1, steps=10).as_dict()
    data = summary_json(
        run, setting=setting, delta=1e-5, update=Update().as_dict(), noise_multiplier=1.0
    )
    data.update(fields)
    data["run"].update(run_fields or {})
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    "fields, expected",
    [
        (
            {"setting": {"noise_multiplier": "abc", "sampling_rate": 0.1, "steps": 10}},
            "noise_multiplier",
        ),
        ({"delta": None}, "delta: must be a number in (0, 1); got None"),
        ({"delta": 1.5}, "delta: must lie in (0, 1)"),
        # validate.integer called int() on them: internal errors (ValueError, TypeError)
        ({"run_fields": {"steps": "abc"}}, "run.steps: must be an integer >= 1; got 'abc'"),
        ({"run_fields": {"steps": None}}, "run.steps: must be an integer >= 1; got None"),
    ],
)
def test_sweep_refuses_a_summary_field_it_reads_naming_the_file(tmp_path, capsys, fields, expected):
    summary = _sweep_summary(tmp_path / "summary.json", **fields)
    out = tmp_path / "sweep.csv"
    line = refused(
        ["sweep", "--summary", summary, "--accountants", "rdp", "--out", str(out)], capsys
    )
    assert f"error: --summary: {summary}: " in line and expected in line
    assert not out.exists()


def test_sweep_refuses_an_accountant_named_twice(tmp_path, capsys):
    summary = _sweep_summary(tmp_path / "summary.json")
    out = tmp_path / "sweep.csv"
    argv = ["sweep", "--summary", summary, "--accountants", "pld", "rdp", "pld", "--out", str(out)]
    assert "error: --accountants: names pld more than once" in refused(argv, capsys)
    assert not out.exists()


def test_an_output_on_an_input_is_refused_and_the_input_kept(tmp_path, capsys):
    """`sweep --out` on its --summary, `figure-table --out` on an input (by another name: a
    link), `figure-draw --pdf` on its --table: each refused naming the output flag, the input
    unchanged."""
    summary = _sweep_summary(tmp_path / "summary.json")
    before = (tmp_path / "summary.json").read_text()
    argv = ["sweep", "--summary", summary, "--accountants", "rdp", "--points", "3"]
    assert "error: --out: " in refused([*argv, "--out", summary], capsys)
    sweep = tmp_path / "sweep.csv"
    assert main([*argv, "--out", str(sweep)]) == 0
    (tmp_path / "link.csv").symlink_to(sweep)
    table = sweep.read_text()
    line = refused(
        ["figure-table", "accountants_vs_pld", "--params-json", '{"sweep": "s"}', "--inputs",
         f"sweep={sweep}", f"summary={summary}", "--out", str(tmp_path / "link.csv")],
        capsys,
    )  # fmt: skip
    assert "error: --out: " in line and "is the input" in line
    draw = [
        "figure-draw",
        "accountants_vs_pld",
        "--table",
        str(sweep),
        "--png",
        str(tmp_path / "x.png"),
    ]
    assert "error: --pdf: " in refused([*draw, "--pdf", str(sweep)], capsys)
    assert (tmp_path / "summary.json").read_text() == before and sweep.read_text() == table


def test_drawing_another_figures_table_names_the_missing_column(tmp_path, capsys):
    """The claims figure reads its rows with itertuples: a table without its columns is one
    --table error, not an internal error."""
    from dplab.commands.figures import _bad_input
    from dplab.tables import write_table

    import pandas as pd

    table = tmp_path / "other.csv"
    write_table(table, pd.DataFrame({"verdict": ["holds"], "steps": [1]}))
    pdf, png = tmp_path / "c.pdf", tmp_path / "c.png"
    line = refused(
        ["figure-draw", "claims", "--table", str(table), "--pdf", str(pdf), "--png", str(png)],
        capsys,
    )
    assert "error: --table: " in line and "no column 'source'" in line
    assert not pdf.exists() and not png.exists()
    with pytest.raises(DPLabError, match="--table: not mine: no column 'epsilon'"):
        with _bad_input("--table", "not mine"):  # any figure's row of itertuples
            _ = next(pd.DataFrame({"steps": [1]}).itertuples()).epsilon
