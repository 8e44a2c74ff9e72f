"""The one compiled part of dplab: the CPU's Gaussian noise kernel (src/dplab/_philox_normal.c).

Everything else is in pyproject.toml.  -ffp-contract=off keeps each float operation a single
IEEE-754 one (the same bits on every instruction set); -fno-math-errno lets sqrt vectorize.
Without a C compiler the install goes on and dplab.philox computes the same numbers with torch
operations, about 30 times slower (docs/training.md, Determinism).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dplab._philox_normal",
            ["src/dplab/_philox_normal.c"],
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-math-errno"],
            optional=True,
        )
    ]
)
