"""A saved strategy file is one object (dplab.mf.saved): an untampered file reads back bit for bit;
each way of making its parts disagree (the ε from one C, the noise from another, or a recorded
number that is not the file's) is refused with one line naming the `dplab mf` command that
writes it again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dplab.errors import DPLabError
from dplab.mf import blt, factorizations, saved, toeplitz
from dplab.mf.workload import momentum_workload, prefix_sum

T = 24
#: what `dplab mf` writes for each file (the default command a refusal names)
COMMANDS = {
    "blt": "dplab mf --strategy blt --steps 24 --buffers 2 --objective mean --min-separation 12",
    "banded_toeplitz": "dplab mf --strategy banded_toeplitz --steps 24 --bands 4 --objective max "
    "--min-separation 12",
    "identity": "dplab mf --strategy identity --steps 24",
    "sqrt": "dplab mf --strategy sqrt --steps 24 --momentum 0.5",
    "optimal": "dplab mf --strategy optimal --steps 24",
    "banded": "dplab mf --strategy banded --steps 24 --bands 3",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One file per strategy, as `dplab mf --out` writes them, and the factorizations written."""
    folder = tmp_path_factory.mktemp("mf")
    A = prefix_sum(T)
    facts = {
        "blt": (blt.blt(T, 2, "mean", 2, 12), 0.0),
        "banded_toeplitz": (toeplitz.banded_toeplitz(T, 4, "max", 2, 12), 0.0),
        "identity": (factorizations.identity(A), 0.0),
        "sqrt": (factorizations.sqrt(momentum_workload(T, 0.5)), 0.5),
        "optimal": (factorizations.optimal(A), 0.0),
        "banded": (factorizations.banded(A, 3), 0.0),
    }
    for name, (fact, momentum) in facts.items():
        saved.save(fact, folder / f"{name}.npz", momentum=momentum)
    return folder, facts


def _load(path):
    return (
        saved.load_toeplitz(path)
        if "toeplitz" in path.name or "blt" in path.name
        else saved.load(path)[0]
    )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_an_untampered_file_reads_back_bit_for_bit(files, name):
    folder, facts = files
    fact, momentum = facts[name]
    back = _load(folder / f"{name}.npz")
    if name in ("blt", "banded_toeplitz"):
        np.testing.assert_array_equal(back.coefficients, fact.coefficients)
        assert back.info == json.loads(json.dumps(fact.info)) and (back.strategy, back.steps) == (
            name,
            T,
        )
        for (b, a), (fb, fa) in zip(back.inverse_sections, fact.inverse_sections):
            np.testing.assert_array_equal(b, fb)
            np.testing.assert_array_equal(a, fa)
    else:
        np.testing.assert_array_equal(back.encoder, fact.encoder)
        assert (back.strategy, back.bands, saved.load(folder / f"{name}.npz")[1]) == (
            name,
            fact.bands,
            momentum,
        )


def _rewrite(src, dst, **change):
    """``src`` with the arrays of ``change`` replaced (a callable: by its value at the old one)."""
    with np.load(src) as f:
        arrays = dict(f)
    for key, value in change.items():
        arrays[key] = value(arrays[key]) if callable(value) else value
    np.savez(dst, **arrays)
    return dst


def _info(**change):
    return lambda text: json.dumps({**json.loads(str(text)), **change})


def _swap_rows(m):
    return m[::-1].copy()


def _entry(m, i, j, factor):
    m = m.copy()
    m[i, j] = m[i, j] * factor if m[i, j] != 0 else factor
    return m


TAMPERED = [
    ("blt", {"coefficients": lambda c: c * 0.01}, "coefficients that are not those of its decays"),
    ("blt", {"coefficients": lambda c: c * 100}, "coefficients that are not those of its decays"),
    (
        "blt",
        {"section_numerators": _swap_rows, "section_denominators": _swap_rows},
        "inverse filter sections",
    ),
    ("blt", {"section_numerators": _swap_rows}, "inverse filter sections"),
    (
        "blt",
        {"section_denominators": lambda d: _entry(d, 0, 1, 1 + 1e-6)},
        "inverse filter sections",
    ),
    (
        "blt",
        {
            "info": lambda text: json.dumps(
                {
                    **json.loads(str(text)),
                    "inverse_buf_decay": [
                        *json.loads(str(text))["inverse_buf_decay"][:-1],
                        0.9 * json.loads(str(text))["inverse_buf_decay"][-1],
                    ],
                }
            )
        },
        "coefficients that are not those of its decays",
    ),
    ("blt", {"info": _info(output_scale=[1.0, 1.0])}, "output_scale"),
    ("blt", {"info": _info(loss=1.0)}, "records loss 1.0"),
    ("blt", {"info": _info(loss="small")}, "records loss 'small'"),
    ("blt", {"info": _info(output_scale="x")}, "output_scale"),
    ("blt", {"info": _info(buf_decay="abc")}, "records BLT decays that define no BLT"),
    (
        "blt",
        {"info": _info(buffers=5)},
        "records buffers = 5",
        "dplab mf --strategy blt --steps 24 --buffers 5 --objective mean --min-separation 12",
    ),
    (
        "blt",
        {"info": _info(objective="median")},
        "records objective 'median'",
        "dplab mf --strategy blt --steps 24 --buffers 2 --objective median --min-separation 12",
    ),
    ("blt", {"info": _info(participations=5)}, "more than T = 24 steps allow"),
    (
        "blt",
        {"strategy": "banded_toeplitz"},
        "holds inverse filter sections",
        "dplab mf --strategy banded_toeplitz --steps 24 --bands 24 --objective mean "
        "--min-separation 12",
    ),
    ("banded_toeplitz", {"coefficients": lambda c: c * 0.01}, "norm"),
    (
        "banded_toeplitz",
        {
            "coefficients": lambda c: (
                np.append(c[:-1], c[-1] * 1.1) / np.linalg.norm(np.append(c[:-1], c[-1] * 1.1))
            )
        },
        "records loss",
    ),
    ("banded_toeplitz", {"info": _info(loss=2.0)}, "records loss 2.0"),
    (
        "banded_toeplitz",
        {
            "section_numerators": np.array([[1.0, 0.0]]),
            "section_denominators": np.array([[1.0, 0.5]]),
        },
        "inverse filter sections",
    ),
    ("identity", {"encoder": lambda C: _entry(C, 3, 3, 0.5)}, "not the identity C"),
    ("identity", {"encoder": lambda C: C * 0.01}, "not the identity C"),
    ("sqrt", {"encoder": lambda C: _entry(C, 5, 2, 1.001)}, "not the sqrt C"),
    (
        "sqrt",
        {"momentum": 0.25},
        "not the sqrt C",
        "dplab mf --strategy sqrt --steps 24 --momentum 0.25",
    ),
    ("optimal", {"encoder": lambda C: _entry(C, 7, 3, 1.001)}, "column norms"),
    ("optimal", {"encoder": lambda C: C * 0.01}, "column norms"),
    ("optimal", {"bands": 1}, "says bands = 1"),
    ("banded", {"encoder": lambda C: _entry(C, 9, 8, 1.001)}, "not the banded C"),
    ("banded", {"encoder": lambda C: _entry(C, 9, 3, 1e-3)}, "says bands = 3"),
    ("banded", {"encoder": lambda C: _entry(C, 3, 9, 1e-3)}, "lower-triangular"),
    ("banded", {"bands": 2}, "says bands = 2", "dplab mf --strategy banded --steps 24 --bands 2"),
]


@pytest.mark.parametrize("name,change,problem,command", [(*case, None)[:4] for case in TAMPERED])
def test_a_tampered_file_is_refused_naming_the_command(
    files, tmp_path, name, change, problem, command
):
    """Scaled coefficients (the ε of one C, the noise of another), swapped or perturbed filter
    sections, an edited C, a recorded number that is not the file's: one line, the command."""
    folder, _ = files
    path = _rewrite(folder / f"{name}.npz", tmp_path / f"{name}.npz", **change)
    with pytest.raises(DPLabError) as err:
        _load(path)
    line = str(err.value)
    assert "\n" not in line and problem in line, line
    assert f"`{command or COMMANDS[name]} --out {path}`" in line, line
