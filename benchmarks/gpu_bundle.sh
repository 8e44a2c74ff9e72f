#!/usr/bin/env bash
# What benchmarks/gpu_check.sh needs on a GPU machine that reaches no package index, made here from
# the project's venv (.venv, `make`): .devsite holds the pure-Python packages dplab, Snakemake and
# Opacus need beyond what such a machine's image has (torch, numpy, scipy, pandas, matplotlib,
# scikit-learn, PyYAML, pytest …), .whl the binary ones as wheels for its Python (PY, default 3.12),
# .devdata/fashion-mnist Debian's Fashion-MNIST files. All three are git-ignored (.gitignore).
#   bash benchmarks/gpu_bundle.sh [PY]
set -euo pipefail
PY=${1:-3.12}
PURE="argparse-dataclass conda-inject configargparse connection-pool docutils dp-accounting dpath fastjsonschema gitdb
gitpython humanfriendly jsonschema jsonschema-specifications jupyter-core mlxtend nbformat opacus platformdirs pulp
referencing smart-open smmap snakemake snakemake-interface-common snakemake-interface-executor-plugins
snakemake-interface-logger-plugins snakemake-interface-report-plugins snakemake-interface-scheduler-plugins
snakemake-interface-storage-plugins tenacity throttler traitlets yte pytest-timeout sqlmodel pydantic annotated-types
typing-inspection typing-extensions"
BINARY="dm-tree immutables rpds-py sqlalchemy greenlet pydantic-core"
rm -rf .devsite .whl && mkdir -p .whl .devdata
.venv/bin/python - $PURE <<'PYEOF'
import importlib.metadata as md, pathlib, shutil, sys
for name in sys.argv[1:]:
    dist = md.distribution(name)
    for f in dist.files:
        src = pathlib.Path(dist.locate_file(f))
        if str(f).startswith("..") or "__pycache__" in str(f) or "solverdir" in str(f) or not src.is_file():
            continue  # scripts, caches and pulp's bundled solvers (Snakemake is run with --scheduler greedy)
        out = pathlib.Path(".devsite", f)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)
PYEOF
find .devsite -type d \( -name tests -o -name test \) -prune -exec rm -rf {} +  # packages' own tests
pins=$(for p in $BINARY; do .venv/bin/python -c "import importlib.metadata as m; print('$p==' + m.version('$p'))"; done)
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d .whl $pins
rm -rf .devdata/fashion-mnist && cp -r "$(dirname "$(dpkg -L dataset-fashion-mnist | grep train-images)")" .devdata/fashion-mnist
du -sh .devsite .whl .devdata
