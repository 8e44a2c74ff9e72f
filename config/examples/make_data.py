"""The worked example's data (docs/own_experiment.md), made by a seeded script so that anyone can
make them again byte for byte.

    python config/examples/make_data.py table config/examples/data/loans.csv
    python config/examples/make_data.py images DIR

``table``: 1200 loan applications, a CSV of numeric and categorical columns and a label,
``repaid`` (yes/no) drawn from a logistic model of the other columns (so a linear model can
learn it); the repository ships its output.  ``images``: scikit-learn's 8×8 digits as greyscale
PNG files in the image_folder layout, DIR/train/<digit>/<i>.png and DIR/test/<digit>/<i>.png
(every fifth image of each digit held out), pixels 0..16 scaled to 0..255.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

ROWS = 1200
EMPLOYMENT = ("salaried", "self-employed", "student", "retired")
REGIONS = ("north", "south", "east", "west")


def table(out: Path, rows: int = ROWS, seed: int = 7) -> None:
    """The loans table (module doc)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, rows)
    income = np.round(rng.lognormal(10.3, 0.5, rows), -2)
    debt_ratio = np.round(rng.beta(2, 5, rows), 3)
    employment = rng.choice(len(EMPLOYMENT), rows, p=[0.55, 0.2, 0.1, 0.15])
    region = rng.choice(len(REGIONS), rows)
    logit = (
        0.3
        + 0.04 * (age - 45)
        + 3.0 * (np.log(income) - 10.3)
        - 10.0 * (debt_ratio - 0.28)
        + np.array([0.8, -0.6, -1.5, 0.4])[employment]
        + np.array([0.0, 0.2, -0.2, 0.0])[region]
    )
    repaid = rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["age", "income", "debt_ratio", "employment", "region", "repaid"])
        for i in range(rows):
            writer.writerow(
                [
                    age[i],
                    f"{income[i]:.0f}",
                    f"{debt_ratio[i]:.3f}",
                    EMPLOYMENT[employment[i]],
                    REGIONS[region[i]],
                    "yes" if repaid[i] else "no",
                ]
            )


def images(out: Path) -> None:
    """scikit-learn's digits as PNG files in the image_folder layout (module doc)."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    seen: dict[int, int] = {}
    for image, label in zip(digits.images, digits.target):
        i = seen[label] = seen.get(label, -1) + 1
        folder = out / ("test" if i % 5 == 4 else "train") / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        pixels = np.round(image * 255 / 16).astype(np.uint8)
        Image.fromarray(pixels, mode="L").save(folder / f"{i:03d}.png")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("table", "images"):
        sys.exit(__doc__.split("\n\n")[1])
    (table if sys.argv[1] == "table" else images)(Path(sys.argv[2]))
