"""The default parameters of a figure: its schema defaults (the seed's values where stated)."""

from __future__ import annotations

import yaml

from conftest import ROOT
from dplab.schemas import validate


def default_params(figure: str) -> dict:
    """``figures.<figure>`` of a config that names the figure with no parameters, validated."""
    base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = {"datasets": base["datasets"], "runs": base["runs"], "figures": {figure: {}}}
    return validate(config)["figures"][figure]
