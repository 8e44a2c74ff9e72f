#!/usr/bin/env bash
# Wall time of the default DAG from a clean results/, of a no-op rerun and of the accounting stage
# (rules sweep and figure_table) rerun alone, in a temporary copy
# of the repository (tracked + untracked-not-ignored files; results/ and .snakemake/ start empty).
#   benchmarks/pipeline.sh [CORES]      (run from the repository root, with snakemake on PATH)
set -euo pipefail
cores=${1:-2}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tmp")
cd "$tmp"
t0=$(date +%s.%N)
snakemake --cores "$cores" --quiet >/dev/null 2>"$tmp/first.log" || { tail -20 "$tmp/first.log"; exit 1; }
t1=$(date +%s.%N)
snakemake --cores "$cores" --quiet >/dev/null 2>"$tmp/noop.log"
t2=$(date +%s.%N)
# the accounting stage again, alone: every sweep (ε vs T per accountant) and every figure table
# (the accountant curves and σ calibrations of the figures; tables of training figures only read runs)
snakemake --cores "$cores" --quiet --forcerun sweep figure_table --allowed-rules sweep figure_table >/dev/null 2>"$tmp/acct.log" \
  || { tail -20 "$tmp/acct.log"; exit 1; }
t3=$(date +%s.%N)
python3 - "$t0" "$t1" "$t2" "$t3" "$cores" <<'PY'
import json, sys
t0, t1, t2, t3, cores = map(float, sys.argv[1:])
print(json.dumps({"cores": int(cores), "clean_run_s": round(t1 - t0, 1), "noop_rerun_s": round(t2 - t1, 2),
                  "accounting_stage_s": round(t3 - t2, 1)}))
PY
