"""Dependencies: the private internals of dp_accounting and torch the code still reads exist in the
installed versions, which lie in pyproject.toml's ranges; the exact pins live in constraints.txt
only, and this environment was installed from it."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from dp_accounting import GaussianDpEvent
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RANGES = {Requirement(r).name: Requirement(r).specifier for r in PROJECT["dependencies"]}

#: package -> the private names read (where: the code that reads them)
INTERNALS = {
    "dp-accounting": (
        "RdpAccountant._rdp (dp_accounting_adapters.RdpAccountant.one_step_rdp);"
        " PrivacyLossDistribution._pmf_remove/_pmf_add/_symmetric (PldAccountant.composed,"
        " risk.privacy_profile); DensePLDPmf._probs/_lower_loss/_infinity_mass/_discretization"
        " (pld_curve.ComposedPmf, risk.privacy_profile);"
        " privacy_loss_distribution._create_pld_pmf_from_monotone_privacy_loss,"
        " GaussianPrivacyLoss._standard_deviation (pld_gaussian.gaussian_pld)"
    ),
    "torch": "torch._C._set_deterministic_algorithms (training.loop.deterministic)",
}


@pytest.mark.parametrize("package", sorted(INTERNALS))
def test_installed_version_lies_in_the_range_the_internals_were_checked_for(package):
    installed = Version(importlib.metadata.version(package))
    assert RANGES[package].contains(installed, prereleases=True), (
        f"{package} {installed} is outside pyproject.toml's {package}{RANGES[package]}, the"
        f" versions whose private internals dplab reads: {INTERNALS[package]}; check them on this"
        " version, then widen the range"
    )


def _internal(obj, name: str, package: str):
    assert hasattr(obj, name), (
        f"{package} {importlib.metadata.version(package)} has no {type(obj).__name__}.{name} "
        f"(dplab reads it: {INTERNALS[package]})"
    )
    return getattr(obj, name)


def test_rdp_internals_hold_the_composed_rdp():
    """_rdp after T Gaussian steps is T·α/(2σ²) on the default orders (the public constant)."""
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(GaussianDpEvent(2.0), 3)
    orders = np.asarray(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=float)
    assert np.array_equal(_internal(acc, "_orders", "dp-accounting"), orders)
    np.testing.assert_allclose(
        _internal(acc, "_rdp", "dp-accounting"), 3 * orders / (2 * 2.0**2), rtol=1e-12
    )


def test_pld_internals_hold_the_pmfs():
    """A Gaussian's PLD: one symmetric PMF whose dense form sums to 1 − its infinity mass."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(1.0, value_discretization_interval=1e-3)
    assert _internal(pld, "_symmetric", "dp-accounting") is True
    assert _internal(pld, "_pmf_add", "dp-accounting") is _internal(
        pld, "_pmf_remove", "dp-accounting"
    )
    dense = pld._pmf_remove.to_dense_pmf()  # noqa: SLF001
    probs = np.asarray(_internal(dense, "_probs", "dp-accounting"))
    assert _internal(dense, "_discretization", "dp-accounting") == 1e-3
    assert isinstance(_internal(dense, "_lower_loss", "dp-accounting"), (int, np.integer))
    assert probs.sum() + _internal(dense, "_infinity_mass", "dp-accounting") == pytest.approx(
        1.0, abs=1e-9
    )


def test_pld_construction_internals_build_the_gaussian_pld():
    """The PMF builder pld_gaussian calls, on the Gaussian privacy loss whose σ it reads, gives
    the PMF of dp_accounting's own public constructor."""
    from dp_accounting.pld import privacy_loss_mechanism

    build = _internal(
        privacy_loss_distribution, "_create_pld_pmf_from_monotone_privacy_loss", "dp-accounting"
    )
    loss = privacy_loss_mechanism.GaussianPrivacyLoss(2.0)
    assert _internal(loss, "_standard_deviation", "dp-accounting") == 2.0
    pmf = build(loss, value_discretization_interval=1e-2, use_connect_dots=True)
    public = privacy_loss_distribution.from_gaussian_mechanism(
        2.0, value_discretization_interval=1e-2
    )
    assert pmf.get_delta_for_epsilon(0.5) == public.get_delta_for_epsilon(0.5)


def test_torch_deterministic_switch_is_what_the_public_api_sets():
    setter = _internal(torch._C, "_set_deterministic_algorithms", "torch")  # noqa: SLF001
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    try:
        setter(True, warn_only=True)
        assert (
            torch.are_deterministic_algorithms_enabled()
            and torch.is_deterministic_algorithms_warn_only_enabled()
        )
    finally:
        setter(before[0], warn_only=before[1])


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_exact_pins_live_in_constraints_only():
    assert not [r for r in PROJECT["dependencies"] if "==" in r], (
        "pyproject.toml: ranges only; pins go to constraints.txt"
    )
    assert _pins()["torch"].endswith("+cpu"), "constraints.txt must pin torch's CPU build"
    pinned = [
        f"{p}: {m.group()}"
        for p in (
            "pyproject.toml",
            "environment.yml",
            "Makefile",
            "workflow/envs/dplab.yaml",
            ".ci/run",
        )
        for m in re.finditer(r"torch==[\w.+]+", (ROOT / p).read_text())
    ]
    assert not pinned, pinned


def test_this_environment_was_installed_from_the_constraints():
    """Every direct dependency that is installed has constraints.txt's version
    (`make` installs with -c)."""
    pins = {k.lower().replace("_", "-"): v for k, v in _pins().items()}
    direct = [Requirement(r).name for r in PROJECT["dependencies"]]
    direct += [
        Requirement(r).name for extra in PROJECT["optional-dependencies"].values() for r in extra
    ]
    wrong = []
    for name in direct:
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if name.lower() in pins and installed != pins[name.lower()]:
            wrong.append(f"{name} {installed} (constraints.txt: {pins[name.lower()]})")
    assert not wrong, f"not installed from constraints.txt (rerun make): {wrong}"
