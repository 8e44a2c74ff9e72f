"""Random mutations of a pipeline config, each given to ``dplab check-config`` (planning) or, with
``--train``, one of its runs given to ``dplab train``: a count of what each answer was.

    python tests/config_mutations.py [--seed S] [--count K] [--numbers] [--train DATA] CONFIG

A mutation changes one thing of CONFIG: a value set to one of :data:`VALUES` (wrong types, 0,
-1, ±inf, 1e308, 2⁶³, paths, text), a key deleted or a key added; ``--numbers`` instead scales
one number of the config (×0 … ×1e6, −1, 2³², 1e300), keeping its type.  With ``--train DATA``
(a folder of prepared datasets by name, e.g. ``results/data`` of a built DAG) each mutation is
of one run of the config (a run entry, or a grid's base and variant), trained for at most 6
steps.  Every answer must be exit 0 (a valid config: ``ok``), 2 (``refused`` in one line naming
a key) or, for training, 3 (a valid run that ``failed``, e.g. diverged, in one line), with
nothing left in the output folder.  Any other exit code or an exception is counted
``internal``, one of those codes with more lines on stderr (log lines aside) or files left
``untidy``; both are printed with their mutation.  It counts, it does not fail
(docs/reliability.md, "Mutations of the shipped configs"); ``tests/test_config_mutations.py``
runs a few.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import random
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import yaml

from dplab.cli import main as dplab

#: what a leaf is set to: other types, bounds, non-finite numbers, paths, text
VALUES = [-1, 0, 1, 2, 0.5, -0.5, 3.0, 1e308, 1e-308, math.nan, math.inf, -math.inf, "", "x",
          "1", None, True, False, [], {}, [1, 2], {"a": 1}, 10**30, 2**63, "nan", "1e400",
          "../../etc", "/tmp/zz", "é"]  # fmt: skip
#: the factors ``--numbers`` scales a number by
FACTORS = [0, 1e-9, 1e-3, 0.5, 0.999, 1.001, 2, 10, 1e3, 1e6, -1]
#: keys a mutation may add to a mapping
ADDED = ["seed", "steps", "extra_key", "batch_size", "noise_multiplier", "target_epsilon", "hidden",
         "weight_decay", "lr", "device", "dataset"]  # fmt: skip
#: the most steps a mutated run trains (``--train``)
STEPS = 6


def _paths(node, path=()):
    """(path, is a container) of every node below ``node``."""
    if isinstance(node, (dict, list)):
        yield path, True
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            yield from _paths(value, path + (key,))
    else:
        yield path, False


def _get(node, path):
    for key in path:
        node = node[key]
    return node


def _number(rng: random.Random, value):
    """``value`` scaled by a factor of :data:`FACTORS` (or an edge), keeping int or float."""
    if rng.random() < 0.2:
        return rng.choice([0, 1, -1, 2**31, 2**32, 2**53] if isinstance(value, int) else
                          [0.0, 1.0, 1e-300, 1e300, -0.0])  # fmt: skip
    scaled = value * rng.choice(FACTORS)
    return int(scaled) if isinstance(value, int) else float(scaled)


def mutate(rng: random.Random, node: dict, numbers: bool) -> tuple | None:
    """Change one thing of ``node`` in place; what was changed, None if nothing fits."""
    paths = list(_paths(node))
    if numbers:
        leaves = [p for p, box in paths if not box and type(_get(node, p)) in (int, float)]
        if not leaves:
            return None
        path = rng.choice(leaves)
        value = _number(rng, _get(node, path))
        _get(node, path[:-1])[path[-1]] = value
        return ("scale", ".".join(map(str, path)), value)
    kind = rng.random()
    if kind < 0.7:
        leaves = [p for p, box in paths if not box and p]
        path, value = rng.choice(leaves), copy.deepcopy(rng.choice(VALUES))
        _get(node, path[:-1])[path[-1]] = value
        return ("set", ".".join(map(str, path)), value)
    where = rng.choice([p for p, is_box in paths if is_box])
    box = _get(node, where)
    if not isinstance(box, dict) or not box:
        return None
    if kind < 0.85:
        key = rng.choice(list(box))
        del box[key]
        return ("delete", ".".join(map(str, where + (key,))))
    key, value = rng.choice(ADDED), copy.deepcopy(rng.choice(VALUES))
    box[key] = value
    return ("add", ".".join(map(str, where + (key,))), value)


def _call(argv: list[str]) -> tuple[object, str]:
    """dplab's exit code (or the exception's name) and stderr, in this process."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = dplab(argv) or 0
    except SystemExit as stop:
        code = stop.code
    except Exception:  # noqa: BLE001 (what the count is for)
        code = "exception"
        err.write(traceback.format_exc(limit=-3))
    return code, err.getvalue()


def _runs(config: dict) -> list[dict]:
    """The config's runs as entries: each run, and each grid's base with each variant."""
    runs = [dict(run) for run in config.get("runs", {}).values()]
    for grid in config.get("grids", {}).values():
        runs += [{**grid["base"], **(keys or {})} for keys in grid["variants"].values()]
    return [{k: v for k, v in run.items() if k != "phases"} for run in runs]


def count(config: dict, seed: int, number: int, numbers: bool, data: Path | None) -> dict:
    """The classes (module docstring) counted over ``number`` mutations; ``internal`` and
    ``untidy`` list each such mutation and its stderr."""
    rng = random.Random(seed)
    counts = {"ok": 0, "refused": 0, "failed": 0, "internal": [], "untidy": []}
    work = Path(tempfile.mkdtemp(prefix="mutations-"))
    try:
        while sum(len(v) if isinstance(v, list) else v for v in counts.values()) < number:
            if data is None:
                node = copy.deepcopy(config)
                change = mutate(rng, node, numbers)
                path = work / "config.yaml"
                try:
                    path.write_text(yaml.safe_dump(node, allow_unicode=True))
                except yaml.YAMLError:
                    continue
                argv, out = ["check-config", str(path)], None
            else:
                node = copy.deepcopy(rng.choice(_runs(config)))
                node["steps"] = min(node.get("steps", STEPS), STEPS)
                change = mutate(rng, node, numbers)
                if isinstance(node.get("steps"), (int, float)) and node["steps"] > STEPS:
                    node["steps"] = STEPS
                out = work / "out"
                shutil.rmtree(out, ignore_errors=True)
                dataset = data / str(node.get("dataset", "digits"))
                argv = ["train", "--run-json", json.dumps(node), "--data", str(dataset)]
                argv += ["--out", str(out), "--threads", "1"]
            if change is None:
                continue
            code, err = _call(argv)
            lines = [line for line in err.splitlines() if not line[:4].isdigit()]  # log lines
            left = out is not None and out.exists() and any(out.iterdir())
            case = {"change": change, "exit": code, "stderr": err[-600:]}
            if code not in (0, 2, 3):
                counts["internal"].append(case)
            elif (code != 0 and left) or len(lines) != (0 if code == 0 else 1):
                counts["untidy"].append(case)
            else:
                counts[{0: "ok", 2: "refused", 3: "failed"}[code]] += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return counts


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--numbers", action="store_true", help="scale numbers, keeping their type")
    parser.add_argument("--train", type=Path, help="mutate runs; DATA: prepared datasets by name")
    args = parser.parse_args(argv)
    counts = count(
        yaml.safe_load(args.config.read_text()), args.seed, args.count, args.numbers, args.train
    )
    for kind in ("internal", "untidy"):
        for case in counts[kind]:
            print(f"{kind}:", json.dumps(case, default=str))
    print(json.dumps({k: len(v) if isinstance(v, list) else v for k, v in counts.items()}))
    return counts


if __name__ == "__main__":
    found = main()
    sys.exit(1 if found["internal"] or found["untidy"] else 0)
