"""Every ``dplab`` subcommand driven with extreme and malformed values.

For each subcommand (listed from the CLI's own parser, so a new one fails here until it has a
baseline in :data:`BASELINES`), hypothesis starts from a valid command line and applies one to
three mutations: a flag set to an extreme or malformed value (0, -1, nan, inf, 1e300, 1e-300,
99999999999999999999999, text, ''), a required flag dropped, a flag repeated, an unknown flag, an
unknown name, a path that is missing, a folder, a file under a file, a file of junk
(JSON/CSV/YAML/npz/pt) or of random bytes; numbers include the ends of each flag's documented
range (an accountant's LIMITS, the thread cap) and the values just past them.  Every case must
end with exit code 0, 2 (bad input) or 3 (runtime failure) — never 1 (internal error), never an
uncaught exception or a hang — and on failure one line on stderr naming a key, flag or file, no
traceback, nothing written under the output path (`probe.check_refusal`); on success no line on
stderr but log lines (no warning from a library or from Python, which a fresh process prints:
`probe.fresh_stderr`).

Data folders given to ``train``/``audit`` are never a valid prepared dataset, so no case trains.
``pytest -s tests/test_fuzz_cli.py`` prints the counts (docs/reliability.md).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import probe
from dplab.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "config" / "config.yaml")
#: CPU seconds one call may use before the case fails as a hang (CPU, not wall time: a loaded CI
#: machine makes a call wait far longer than it works), and the wall seconds it may wait; 120 s of
#: CPU: calibrating σ of amplified banded MF at q = 1e-5 with pld builds ~30 one-step PLDs of
#: ~2.3 s each (46 s of CPU measured on this project's machine, idle)
CALL_LIMIT, WALL_LIMIT = 120, 600
EXAMPLES = 30
ACCOUNTANT_EXAMPLES = 15
#: fewer for an accountant whose every ε takes seconds (a quadrature of up to ADD_POINTS_MAX points)
FEWER_EXAMPLES = {"balls_in_bins": 8}
#: accountants whose σ search is bounded but too slow for this test at extreme targets (a known
#: limit, docs/reliability.md): their `sigma` is fuzzed at ε <= 10 only
SLOW_SIGMA = {"balls_in_bins"}

NUMBERS = (
    "0",
    "-1",
    "nan",
    "inf",
    "-inf",
    "1e300",
    "1e-300",
    "99999999999999999999999",
    "-99999999999999999999999",
    "abc",
    "",
    " ",
    "0x10",
    "1,5",
    "1",
    "2",
    "0.5",
    "1e-5",
    "10",
)
NAMES = (
    "",
    "nope",
    "rdp",
    "pld",
    "naive",
    "gaussian_analytic",
    "balls_in_bins",
    "asoodeh_projected",
    "dp_sgd",
    "optimal",
    "banded",
    "poisson",
    "shuffle",
    "full_batch",
    "../x",
    "é",
    "--",
    "-x",
)
#: what a key of a JSON flag's object may be set to
JSON_EXTREMES = (0, -1, 1e300, 1e-300, 99999999999999999999999, "x", "", None, [], {}, True)
JSON_VALUES = (
    "",
    "{",
    "[]",
    "null",
    "5",
    '"x"',
    "{}",
    '{"x": 1}',
    '{"kind": "nope"}',
    '{"kind": "synthetic", "train_size": -1}',
    '{"kind": "synthetic", "train_size": 1e300}',
    '{"seed": -1}',
    '{"seed": 0, "runs": 0}',
    '{"runs": 0}',
    '{"method": "dp_sgd"}',
    '{"threat_model": "white_box"}',
    '{"steps": "NaN"}',
    '{"noise_multiplier": Infinity}',
    '{"figures": 5}',
    '{"runs": {"a": {"method": "nope"}}}',
)


def _junk_files(folder: Path) -> dict[str, str]:
    """Paths a hostile user gives: missing, a folder, a file under a file, and files of junk."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "junk.json": '{"a": [1, 2',
        "list.json": "[1, 2, 3]",
        "nan.json": '{"epsilon": NaN}',
        "junk.csv": 'a,b\n1,"2\n',
        "empty.csv": "",
        "cols.csv": "x,y\n1,2\n",
        "junk.yaml": "runs: [1, 2\n  - : :",
        "scalar.yaml": "5\n",
        "runs.yaml": "runs: 5\n",
        "tab.yaml": "seed:\t0\n",
        "junk.npz": "PK\x03\x04 not a zip",
        "junk.pt": "not a torch file",
        "empty": "",
        "bin": "\x00\xff\xfe" * 50,
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="latin-1")
    np.savez(folder / "wrong.npz", x=np.zeros(3))
    (folder / "dir").mkdir(exist_ok=True)
    # a folder that looks like a prepared dataset but holds junk
    data = folder / "data_junk"
    data.mkdir(exist_ok=True)
    for name in ("train.npz", "test.npz"):
        (data / name).write_text("junk")
    (data / "info.json").write_text('{"name": "digits"')
    data = folder / "data_truncated"
    data.mkdir(exist_ok=True)
    np.savez(data / "train.npz", x=np.zeros((4, 3)))
    (data / "info.json").write_text(json.dumps({"name": "digits"}))
    paths = {name: str(folder / name) for name in files}
    paths.update(
        wrong_npz=str(folder / "wrong.npz"),
        dir=str(folder / "dir"),
        data_junk=str(folder / "data_junk"),
        data_truncated=str(folder / "data_truncated"),
        missing=str(folder / "missing" / "x.json"),
        under_file=str(folder / "junk.json" / "x.csv"),
        empty_str="",
        config=CONFIG,
    )
    return paths


@pytest.fixture(scope="module")
def junk(tmp_path_factory) -> dict[str, str]:
    return _junk_files(tmp_path_factory.mktemp("junk"))


RAW = yaml.safe_load(Path(CONFIG).read_text())
AUDIT = {**RAW["audits"]["digits_last_iterate_convex"], "steps": [2], "runs": 2, "seed": 0}

#: valid (or nearly valid) command lines per subcommand; OUT/OUTDIR/… are placeholders for
#: paths under the output folder; DATA is always a junk data folder (no case trains)
BASELINES: dict[str, list[list[str]]] = {
    "prepare-data": [
        ["--dataset-json", json.dumps(RAW["datasets"]["synthetic"]), "--out", "OUTDIR"],
        ["--config", CONFIG, "--dataset", "synthetic", "--out", "OUTDIR"],
    ],
    "train": [
        [
            "--config",
            CONFIG,
            "--run",
            "dp_sgd",
            "--data",
            "DATA",
            "--out",
            "OUTDIR",
            "--threads",
            "1",
        ],
        ["--run-json", json.dumps(RAW["runs"]["dp_sgd"]), "--data", "DATA", "--out", "OUTDIR"],
    ],
    "epsilon": [
        [
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "1.0",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ],
        [
            "--accountant",
            "pld",
            "--noise-multiplier",
            "1.0",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ],
        [
            "--accountant",
            "asoodeh_projected",
            "--noise-multiplier",
            "2",
            "--dataset-size",
            "100",
            "--batch-size",
            "10",
            "--steps",
            "100",
            "--diameter",
            "1",
            "--lr",
            "0.1",
            "--clip",
            "1",
            "--sampling",
            "shuffle",
            "--neighbouring",
            "replace_one",
            "--delta",
            "1e-5",
        ],
    ],
    "delta": [
        [
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "1.0",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--epsilon",
            "1",
        ],
        [
            "--accountant",
            "gaussian_analytic",
            "--noise-multiplier",
            "1.0",
            "--sensitivity",
            "1",
            "--epsilon",
            "1",
        ],
    ],
    "sigma": [
        [
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
        ],
        [
            "--accountant",
            "pld",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
        ],
        [
            "--accountant",
            "gaussian_analytic",
            "--sensitivity",
            "1",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
        ],
    ],
    "accountants": [[]],
    "sweep": [
        [
            "--summary",
            "SUMMARY",
            "--accountants",
            "rdp",
            "pld",
            "--points",
            "3",
            "--out",
            "OUT.csv",
        ],
        ["--config", CONFIG, "--sweep", "dp_sgd", "--out", "OUT.csv"],
    ],
    "figure-table": [
        ["gaussian_sigma", "--params-json", "{}", "--out", "OUT.csv"],
        ["accountants_vs_pld", "--config", CONFIG, "--out", "OUT.csv"],
    ],
    "figure-draw": [["gaussian_sigma", "--table", "TABLE", "--pdf", "OUT.pdf", "--png", "OUT.png"]],
    "index": [["--results", "RESULTS", "--out", "OUT.txt"]],
    "mf": [
        [
            "--strategy",
            "banded",
            "--steps",
            "16",
            "--min-separation",
            "4",
            "--bands",
            "2",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
        ],
        ["--strategy", "optimal", "--steps", "8", "--out", "OUT.npz"],
    ],
    "audit": [
        ["--audit-json", json.dumps(AUDIT), "--data", "DATA", "--out", "OUT.csv"],
        ["--config", CONFIG, "--audit", "digits_white_box", "--data", "DATA", "--out", "OUT.csv"],
    ],
    "provenance": [
        ["--config-json", "{}", "--out", "OUT.json", CONFIG],
        ["--config", CONFIG, "--out", "OUT.json", CONFIG],
    ],
    "check-config": [[CONFIG]],
    "dvc-yaml": [["--out", "OUT.yaml"], ["--out", "OUT.yaml", "--check"]],
}

#: flags (by dest) whose value is a path read, a path written, JSON, or a list of names
READ_PATHS = {
    "config",
    "data",
    "summary",
    "table",
    "results",
    "mf_cache",
    "inputs",
    "files",
    "outputs",
}
WRITE_PATHS = {"out", "pdf", "png"}


def subcommands() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


def _edges(dest: str) -> list[str]:
    """The ends of ``dest``'s documented range (an accountant's LIMITS, the thread cap) and the
    values just past them."""
    from dplab.accounting.base import LIMITS
    from dplab.validate import MAX_THREADS

    low, high = {
        **{key: limit[:2] for key, limit in LIMITS.items()},
        "threads": (1, MAX_THREADS),
    }.get(dest, (None, None))
    if low is None:
        return []
    if (
        float(high).is_integer() and float(low).is_integer() and dest != "epsilon"
    ):  # a count: the next integer
        return [str(int(low)), str(int(low) - 1), str(int(high)), str(int(high) + 1)]
    return [
        repr(low),
        repr(math.nextafter(low, -math.inf)),
        repr(high),
        repr(math.nextafter(high, math.inf)),
    ]


def _pool(action, junk: dict[str, str]) -> list:
    """The values a mutation may give ``action``'s flag: extreme numbers, the ends of its range
    and just past them, names or paths."""
    dest = action.dest
    if dest in WRITE_PATHS:
        return ["OUT", junk["dir"], junk["under_file"], "", junk["junk.json"] + "/"]
    if dest in READ_PATHS:
        return list(junk.values())
    if dest.endswith("_json"):
        return list(JSON_VALUES)
    if action.type is not None or dest in ("points", "threads"):
        return list(NUMBERS) + _edges(dest)
    if action.choices:
        return [*map(str, action.choices), *NAMES]
    return list(NAMES)


def _flag_actions(sub) -> list:
    return [a for a in sub._actions if a.dest != "help"]


@st.composite
def mutated(draw, name: str, junk: dict[str, str]) -> list[str]:
    """``name``'s baseline with one to three mutations, as (flag or slot, values) edits."""
    sub = subcommands()[name]
    actions = _flag_actions(sub)
    argv = list(draw(st.sampled_from(BASELINES[name])))
    for _ in range(draw(st.sampled_from((1, 1, 1, 2, 3)))):
        op = draw(
            st.sampled_from(
                ("set", "set", "set", "drop", "repeat", "unknown", "bytes")
                if actions
                else ("unknown",)
            )
        )
        if op == "unknown":
            argv += draw(
                st.sampled_from((["--no-such-flag"], ["--no-such-flag", "1"], ["extra"], ["-"]))
            )
            continue
        readers = [a for a in actions if a.dest in READ_PATHS]
        if op == "bytes" and not readers:
            op = "set"
        action = draw(st.sampled_from(readers if op == "bytes" else actions))
        flag = action.option_strings[0] if action.option_strings else None
        if (
            op == "bytes"
        ):  # a file of random bytes (BYTES:<hex>, written by _resolve) where a file is read
            value = "BYTES:" + draw(st.binary(max_size=300)).hex()
            if flag is None:
                argv = [value] + (argv[1:] if argv and not argv[0].startswith("--") else argv)
            else:
                argv = _without(argv, flag, sub) + [flag, value]
            continue
        if flag is None:  # a positional: replace the first one, or give a pool value
            values = draw(st.lists(st.sampled_from(_pool(action, junk)), min_size=0, max_size=2))
            if argv and not argv[0].startswith("--"):
                argv = values + argv[1:]
            else:
                argv = values + argv
            continue
        given = {token: argv[i + 1] for i, token in enumerate(argv[:-1]) if token.startswith("--")}
        argv = _without(argv, flag, sub)
        if op == "drop":
            continue
        if action.nargs == 0:
            value = []
        elif action.nargs in ("*", "+"):
            value = draw(st.lists(st.sampled_from(_pool(action, junk)), min_size=0, max_size=3))
        elif action.dest.endswith("_json") and _object(given.get(flag)) and draw(st.booleans()):
            value = [draw(json_key_set(given[flag]))]
        else:
            value = [draw(st.sampled_from(_pool(action, junk)))]
        argv += [flag, *value] * (2 if op == "repeat" else 1)
    return argv


def _object(text: str | None) -> bool:
    """Whether ``text`` is a non-empty JSON object (a baseline's, not one a mutation gave)."""
    try:
        return isinstance(json.loads(text), dict) and bool(json.loads(text))
    except (TypeError, ValueError):
        return False


@st.composite
def json_key_set(draw, text: str) -> str:
    """The JSON object ``text`` with one key (top level or one level down) set to an extreme value
    (or 1e300-scaled: NaN and Infinity, which Python's json reads)."""
    data = json.loads(text)
    paths = [(key,) for key in data] + [
        (key, sub) for key, value in data.items() if isinstance(value, dict) for sub in value
    ]
    path = draw(st.sampled_from(paths))
    value = draw(st.sampled_from((*JSON_EXTREMES, math.nan, math.inf)))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(data)


def _without(argv: list[str], flag: str, sub) -> list[str]:
    """``argv`` less ``flag`` and the values that follow it."""
    out, skip = [], False
    for token in argv:
        if token == flag:
            skip = True
            continue
        if skip and not (token.startswith("--") and token in sub._option_string_actions):
            continue
        skip = False
        out.append(token)
    return out


COUNTS: Counter = Counter()
LAST_OUT = [""]  # the stdout of the last case, for checks of its answer


def check_case(argv: list[str], out_root: Path, capfd) -> int:
    """Run one case, in ``out_root`` (empty: a relative or empty output path lands there too),
    within :data:`CALL_LIMIT` CPU seconds, and assert the contract of the module docstring;
    return its exit code."""
    shutil.rmtree(out_root, ignore_errors=True)
    out_root.mkdir(parents=True)
    os.chdir(out_root)
    case = f"dplab {' '.join(map(repr, argv))}"
    try:
        answer = probe.call(argv, capfd, CALL_LIMIT, WALL_LIMIT)
    except Exception as err:  # noqa: BLE001 - the point: none may escape
        pytest.fail(f"{case}: uncaught {type(err).__name__}: {err}")
    if answer.code is None:
        pytest.fail(f"{case}: no answer within {CALL_LIMIT} s of CPU ({WALL_LIMIT} s wall)")
    LAST_OUT[0] = answer.out
    COUNTS["cases"] += 1
    COUNTS[f"exit {answer.code}"] += 1
    COUNTS["argparse"] += answer.exited and answer.code != 0
    if answer.code == 0:  # no warning on a good run either (a library's, or Python's)
        lines = probe.error_lines(answer.err)
        assert "Traceback" not in answer.out + answer.err, f"{case}: traceback\n{answer.err}"
        assert not lines, f"{case}: exit 0 with {len(lines)} lines on stderr\n{answer.err}"
    else:
        probe.check_refusal(answer, case, out_root, codes=(2, 3))
    return answer.code


def _resolve(argv: list[str], junk: dict[str, str], out_root: Path) -> list[str]:
    """Placeholders → paths: OUT* under ``out_root``; DATA, SUMMARY, TABLE, RESULTS junk inputs."""
    inputs = {
        "DATA": junk["data_junk"],
        "SUMMARY": junk["junk.json"],
        "TABLE": junk["cols.csv"],
        "RESULTS": junk["dir"],
        "BIN": junk["bin"],
    }
    resolved = []
    for token in argv:
        if token.startswith("OUT"):
            token = str(out_root / ("out" + token[3:]))
        elif token.startswith("BYTES:"):  # beside out_root: an input, not an output left behind
            path = out_root.parent / f"random_{len(resolved)}.bin"
            path.write_bytes(bytes.fromhex(token[6:]))
            token = str(path)
        resolved.append(inputs.get(token, token))
    return resolved


def test_every_subcommand_has_a_baseline():
    missing = sorted(set(subcommands()) - set(BASELINES))
    assert not missing, f"subcommands without a fuzz baseline in tests/test_fuzz_cli.py: {missing}"


@pytest.fixture(autouse=True)
def _back_home(monkeypatch):
    monkeypatch.chdir(
        ROOT
    )  # check_case moves into its out_root; monkeypatch moves back after the test


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_fuzz_subcommand(name, junk, tmp_path, capfd):
    assert name in subcommands(), f"BASELINES names {name!r}, which is no subcommand"
    out_root = tmp_path / "out_root"
    for argv in BASELINES[
        name
    ]:  # every baseline parses: the mutations start from a valid command line
        build_parser().parse_args([name, *_resolve(argv, junk, out_root)])

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(mutated(name, junk))
    def fuzz(argv):
        check_case([name, *_resolve(argv, junk, out_root)], out_root, capfd)

    fuzz()


#: finite extremes for a setting key of an accountant: (integer keys, real keys)
INT_EXTREMES = ("0", "-1", "1", "2", "1000000000", "1000000000000000", "99999999999999999999999")
REAL_EXTREMES = (
    "0",
    "-1",
    "1e-300",
    "1e-30",
    "1e-6",
    "0.03",
    "0.5",
    "1",
    "1e7",
    "1e15",
    "1e30",
    "1e300",
)
QUERIES = (
    ("epsilon", "--delta", ("1e-300", "1e-12", "1e-5", "0.5", "1")),
    ("delta", "--epsilon", ("1e-12", "1", "100", "10000", "1e300")),
    ("sigma", "--epsilon", ("1e-12", "1", "1000", "10000")),
)


@st.composite
def extreme_setting(draw, name: str) -> list[str]:
    """A query to accountant ``name`` with its required keys at values it accepts (PROBE), up to
    two setting keys set to finite extremes, and an extreme ε or δ."""
    from dplab import accounting
    from dplab.commands.accounting import PROBE, SETTING_FLAGS

    kinds = {key: kind for key, kind, _ in SETTING_FLAGS}
    acc = accounting.get(name)
    keys = {key for key in acc.requires if key in PROBE}
    if keys & {"sampling_rate", "dataset_size", "batch_size"} or acc.requires == ():
        keys |= {"dataset_size", "batch_size"}
    values = {key: str(PROBE[key]) for key in keys}
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(set(kinds) - {"alpha"})))
        values[key] = draw(st.sampled_from(INT_EXTREMES if kinds[key] is int else REAL_EXTREMES))
    command, flag, targets = draw(st.sampled_from(QUERIES))
    if command == "sigma" and name in SLOW_SIGMA:
        targets = [t for t in targets if float(t) <= 10]
    argv = [
        command,
        "--accountant",
        name,
        "--sampling",
        draw(st.sampled_from(sorted(acc.samplings))),
    ]
    argv += [flag, draw(st.sampled_from(targets))]
    if command == "sigma":
        values.pop("noise_multiplier", None)
        argv += ["--delta", draw(st.sampled_from(("1e-12", "1e-5", "0.5")))]
    for key, value in sorted(values.items()):
        argv += ["--" + key.replace("_", "-"), value]
    return argv


def _accountant_names() -> list[str]:
    from dplab.accounting import eligibility

    return eligibility.defaults()  # the accountants of a setting (mf takes an MF event)


@pytest.mark.parametrize("name", _accountant_names())
def test_fuzz_every_accountant_at_extreme_settings(name, tmp_path, capfd):
    """Every registered accountant, its setting pushed to finite extremes: it answers a valid
    number (ε finite and >= 0, δ in [DELTA_FLOOR, 1], σ finite and > 0) or refuses in one line —
    within the time limit."""
    from dplab.accounting.base import DELTA_FLOOR

    out_root = tmp_path / "out_root"

    @settings(
        max_examples=FEWER_EXAMPLES.get(name, ACCOUNTANT_EXAMPLES),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(extreme_setting(name))
    def fuzz(argv):
        capfd.readouterr()
        code = check_case(argv, out_root, capfd)
        COUNTS["accountant cases"] += 1
        if code == 0:
            answer = json.loads(LAST_OUT[0])
            value = answer.get(
                "epsilon"
                if argv[0] == "epsilon"
                else "delta"
                if argv[0] == "delta"
                else "noise_multiplier"
            )
            assert math.isfinite(value), (argv, answer)
            if argv[0] == "delta":
                assert DELTA_FLOOR <= value <= 1, (argv, answer)
            else:
                assert value >= 0 and (argv[0] == "epsilon" or value > 0), (argv, answer)

    fuzz()


#: cases the fuzz found that once failed the contract (exit 1, a traceback or a hang): kept
#: here so they stay fixed whatever the draws of future hypothesis versions
REGRESSIONS: list[list[str]] = [
    ["check-config", "BIN"],  # a binary config: UnicodeDecodeError (exit 1)
    [
        "train",
        "--config",
        CONFIG,
        "--run",
        "dp_sgd",
        "--data",
        "DATA",
        "--out",
        "OUTDIR",
        "--threads",
        "99999999999999999999999",
    ],  # torch.set_num_threads overflow (exit 1)
    [
        "provenance",
        "--out",
        "OUT.json",
        CONFIG,
        "--config-json",
        "",
    ],  # '' read as no --config-json (exit 1)
    [
        "prepare-data",
        "--dataset-json",
        json.dumps(RAW["datasets"]["synthetic"]),
        "--out",
        "",
    ],  # wrote into cwd
]


@pytest.mark.parametrize("argv", REGRESSIONS, ids=lambda argv: " ".join(argv)[:60])
def test_fuzz_regressions(argv, junk, tmp_path, capfd):
    out_root = tmp_path / "out_root"
    check_case(_resolve(argv, junk, out_root), out_root, capfd)


def teardown_module():
    refused = COUNTS["exit 2"] + COUNTS["exit 3"]
    print(
        f"\nfuzz: {COUNTS['cases']} cases, {refused} refused cleanly (exit 2: "
        f"{COUNTS['exit 2']}, of which {COUNTS['argparse']} by argparse; exit 3: "
        f"{COUNTS['exit 3']}), {COUNTS['exit 0']} answered (exit 0)"
    )


def test_pools_hold_the_extremes():
    """The number pool holds the extreme values the module docstring names (a guard against
    trimming it)."""
    floats = {float(v) for v in NUMBERS if re.fullmatch(r"[-+0-9.e]+|nan|inf|-inf", v)}
    assert {0.0, -1.0, 1e300, 1e-300, 99999999999999999999999.0} <= floats
    assert any(math.isnan(v) for v in floats) and math.inf in floats
