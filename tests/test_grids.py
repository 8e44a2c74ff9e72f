"""Grids of runs: expansion, validation, and the DVC view of them."""

from __future__ import annotations

import copy
import hashlib

import pytest
import yaml

from conftest import ROOT, run
from dplab import entries
from dplab.config import check_config
from dplab.schemas import load_yaml, validate
from dplab.errors import DPLabError

GRID = {
    "base": {
        "model": "logreg",
        "dataset": "digits",
        "steps": 5,
        "batch_size": 64,
        "lr": 0.5,
        "clip": 1.0,
    },
    "variants": {"dp_sgd": {"method": "dp_sgd"}, "dp_gd": {"method": "dp_gd", "lr": 1.0}},
    "target_epsilon": [1, 0.5],
    "seeds": [0, 3],
}


#: GRID tried at two learning rates: its base and variants then set none
GRID_LRS = {
    **GRID,
    "base": {k: v for k, v in GRID["base"].items() if k != "lr"},
    "variants": {"dp_sgd": {"method": "dp_sgd"}, "dp_gd": {"method": "dp_gd"}},
    "lrs": [0.25, 2],
}


def config_with_grid(grid=GRID) -> dict:
    config = validate(load_yaml(ROOT / "config" / "config.yaml"))
    config["grids"] = {"mini": copy.deepcopy(grid)}
    return validate(config)


def test_every_variant_epsilon_and_seed_is_one_run():
    runs = entries.grid_runs(config_with_grid(), "mini")
    assert sorted(runs) == sorted(
        f"digits/logreg/{v}/eps{e:g}/seed{s}"
        for v in ("dp_sgd", "dp_gd")
        for e in (1, 0.5)
        for s in (0, 3)
    )
    item = runs["digits/logreg/dp_gd/eps0.5/seed3"]
    run = item["run"]
    assert (
        run["method"] == "dp_gd"
        and run["lr"] == 1.0
        and run["target_epsilon"] == 0.5
        and item["seed"] == 3
    )
    assert run["noise_multiplier"] is None and run["steps"] == 5


def test_no_two_runs_of_a_grid_share_their_generators():
    """Runs of one grid seed at two learning rates drew the same batches and noise: released
    together, b·(ΔW₁/η₁ − ΔW₂/η₂) gave the difference of their clipped sums without noise, while
    grid_epsilon composed them as independent.  Each run now trains with the first 32 bits of
    SHA-256 of "<base seed>/<grid>/<run name>"."""
    config = config_with_grid(GRID_LRS)
    runs = entries.grid_runs(config, "mini")
    seeds = [item["run"]["seed"] for item in runs.values()]
    assert len(set(seeds)) == len(seeds) == 16
    name = "digits/logreg/dp_gd/eps0.5/lr2/seed3"
    digest = hashlib.sha256(f"{config['seed']}/mini/{name}".encode()).digest()
    assert runs[name]["run"]["seed"] == int.from_bytes(digest[:4], "big")
    assert runs[name]["seed"] == 3


@pytest.mark.parametrize(
    "grid", [GRID, GRID_LRS, {**GRID, "base": {**GRID["base"], "model": "models/net.py:Net"}}]
)
def test_a_grid_run_s_name_gives_back_its_variant_lr_and_seed(grid):
    """The figures read a run's variant, lr and grid seed from its name (entries.GridName, one
    parser where privacy_utility and mf_regime each had their own): every name grid_runs makes
    gives back what made it; anything else is refused naming the key."""
    for name, item in entries.grid_runs(config_with_grid(grid), "mini").items():
        parts = entries.GridName.of(name, "figures.x.grids")
        lr = None if parts.lr is None else float(parts.lr)
        assert (parts.variant, lr, parts.seed) == (item["variant"], item["lr"], item["seed"])
    for other in ("digits/logreg/dp_sgd/seed0", "runs/dp_sgd", "a/b/dp-sgd/eps1/seed0"):
        with pytest.raises(DPLabError, match="figures.x.grids"):
            entries.GridName.of(other, "figures.x.grids")


def test_the_schema_describes_the_run_names_the_code_makes():
    """The schema's description of grid-run folders, filled in, gives entries.grid_runs' names."""
    from dplab.schemas import load_schema

    text = " ".join(load_schema("config")["properties"]["grids"]["description"].split())
    template = text.split("results/grids/<grid>/", 1)[1].split()[0]

    def names(lr: str) -> set[str]:
        return {
            template.replace("<dataset>", "digits")
            .replace("<model>", "logreg")
            .replace("<variant>", v)
            .replace("<target_epsilon>", f"{e:g}")
            .replace("[/lr<lr>]", lr)
            .replace("<seed>", str(s))
            for v in ("dp_sgd", "dp_gd")
            for e in (1, 0.5)
            for s in (0, 3)
        }

    private = names("")
    assert set(entries.grid_runs(config_with_grid(), "mini")) == private
    tried = entries.grid_runs(config_with_grid(GRID_LRS), "mini")
    assert set(tried) == names("/lr0.25") | names("/lr2")  # with lrs: every run once per lr
    assert {(item["lr"], item["run"]["lr"]) for item in tried.values()} == {(0.25, 0.25), (2, 2)}
    sigma = {**copy.deepcopy(GRID), "target_epsilon": None}
    sigma["base"]["noise_multiplier"] = 2.0
    sigma.pop("target_epsilon")
    names = set(entries.grid_runs(config_with_grid(sigma), "mini"))
    assert names == {n.replace("eps1/", "sigma2/") for n in private if "/eps1/" in n}
    assert "sigma<noise_multiplier> instead of eps" in text and "nonprivate for sgd" in text


def test_grid_runs_are_validated_with_the_run_schema():
    bad = copy.deepcopy(GRID)
    bad["variants"]["dp_gd"]["lr"] = -1
    config = config_with_grid(bad)
    with pytest.raises(DPLabError) as err:
        check_config(config)
    assert err.value.key == "grids.mini.variants.dp_gd.lr"


@pytest.mark.parametrize(
    ("where", "key"),
    [("base", "grids.mini.base.lr"), ("dp_gd", "grids.mini.variants.dp_gd.lr")],
)
def test_a_grid_with_lrs_refuses_an_lr_it_would_never_use(where, key):
    """With ``lrs`` every run trains at one of them, so an ``lr`` of the base or of a variant is
    refused where it is set, not silently replaced."""
    grid = copy.deepcopy(GRID_LRS)
    (grid["base"] if where == "base" else grid["variants"][where])["lr"] = 1.0
    accepted = config_with_grid(GRID_LRS)
    accepted["figures"] = {}  # they read the config's own grids
    assert any(name.startswith("grids/mini/") for name in check_config(accepted))
    with pytest.raises(DPLabError) as err:
        check_config(config_with_grid(grid))
    assert err.value.key == key and "[0.25, 2]" in err.value.message


def test_grid_outputs_are_in_the_dag_and_dvc(project):
    from test_dvc import dvc_outputs, snakemake_outputs

    path = project / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["grids"] = {"mini": GRID}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    smk = snakemake_outputs(project)
    assert "results/grids/mini/digits/logreg/dp_gd/eps0.5/seed3/summary.json" in smk
    run(
        ["dplab", "dvc-yaml"], cwd=project
    )  # dvc.yaml of the changed config: one stage per grid run
    assert "results/grids/mini/digits/logreg/dp_gd/eps0.5/seed3/summary.json" in dvc_outputs(
        project
    )


def test_a_grid_may_leave_a_key_to_the_run_schema_default():
    """The figures read a grid's runs as resolved: without ``steps`` in its base, mf_vs_dpsgd's
    runs train T = 200 (the run schema's default), and the checks of the figures on that grid
    (mf_structure, mf_vs_dpsgd) plan them, where they raised KeyError: 'steps' before."""
    config = validate(load_yaml(ROOT / "config" / "config.yaml"))
    del config["grids"]["mf_vs_dpsgd"]["base"]["steps"]
    runs = check_config(config)
    steps = {run["steps"] for name, run in runs.items() if name.startswith("grids/mf_vs_dpsgd/")}
    assert steps == {200}
