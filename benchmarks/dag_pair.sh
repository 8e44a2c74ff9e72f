#!/bin/bash
# The default DAG's CPU time at a base commit and at this checkout's HEAD, the same DAG content
# (the mf_regime grid, figure and dataset removed from both configs: fbd79dc, the default base,
# has none), built side by side with one core each in scratch clones, so both meet the same load.
#   benchmarks/dag_pair.sh [BASE (default fbd79dc)] [SCRATCH (default /tmp/dag_pair)]
set -u
repo=$(git rev-parse --show-toplevel)
base=${1:-fbd79dc}
scratch=${2:-/tmp/dag_pair}
venv=$repo/.venv
mkdir -p "$scratch" && cd "$scratch" && rm -rf before after
git clone -q "$repo" before && git -C before checkout -q "$base"
git clone -q "$repo" after
"$venv/bin/python" - "$scratch"/{before,after}/config/config.yaml <<'PY'
import sys

import yaml

for p in sys.argv[1:]:
    c = yaml.safe_load(open(p))
    if "mf_regime" in c["grids"]:
        c["grids"].pop("mf_regime"); c["figures"].pop("mf_regime")
        c["datasets"].pop("mnist5000_val")
        yaml.safe_dump(c, open(p, "w"), sort_keys=False)
PY
export PATH=$venv/bin:$PATH
# a clone's compiled noise kernel (dplab ≥ 0.2.0), which its src/ must hold under PYTHONPATH
for d in before after; do
  if [ -f "$scratch/$d/setup.py" ]; then
    ( cd "$scratch/$d" && python setup.py -q build_ext --inplace > /dev/null 2>&1 ) || exit 1
  fi
done
for d in before after; do
  ( cd "$scratch/$d" && export PYTHONPATH="$scratch/$d/src" &&
    /usr/bin/time -f "$d user %U sys %S wall %e" snakemake --cores 1 > ../$d.log 2>&1 ) &
done
wait
tail -n1 "$scratch/before.log" "$scratch/after.log"
