#!/usr/bin/env bash
# Wall time of the default DAG from a clean results/ and of a no-op rerun, in a temporary copy
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
python3 - "$t0" "$t1" "$t2" "$cores" <<'PY'
import json, sys
t0, t1, t2, cores = map(float, sys.argv[1:])
print(json.dumps({"cores": int(cores), "clean_run_s": round(t1 - t0, 1), "noop_rerun_s": round(t2 - t1, 2)}))
PY
