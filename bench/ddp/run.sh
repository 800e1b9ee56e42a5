#!/usr/bin/env bash
# Data-parallel benchmark (not a timed test): steps/s and communication share, 1 vs 2 Gloo ranks
# on this machine, and a bucket-size sweep (one huge bucket = no overlap with backward).
#   bench/ddp/run.sh [BUILD_DIR] [MODEL]     e.g. bench/ddp/run.sh build-ddp org.torchhost.small_cnn
# Every rank gets one intra-op thread (run.threads = 1), so 1 rank and 2 ranks do the same
# per-rank work; the 2-rank step time minus the 1-rank step time is what communication (and
# sharing the machine) costs. Printed as ratios; absolute times depend on the machine's load.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-ddp}
MODEL=${2:-org.torchhost.small_cnn}
HOST="$BUILD/bin/host"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# Median time/step_s of the step records after the first (warm-up) logging window.
step_time() {
  python3 - "$1/history.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = [r["time/step_s"] for r in rows if "time/step_s" in r][1:]
print(statistics.median(t) if t else float("nan"))
PY
}

run() { # name, launcher args, extra --set
  local name=$1 launch=$2; shift 2
  # shellcheck disable=SC2086
  "$HOST" $launch --config bench/ddp/bench.toml --output-dir "$OUT/$name" --set "model.component=\"$MODEL\"" "$@" \
    > "$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
  step_time "$OUT/$name"
}

one=$(run one "")
two=$(run two "--nproc-per-node 2")
echo "model $MODEL, batch 32 per rank, 1 thread per rank"
python3 - "$one" "$two" <<'PY'
import sys
one, two = map(float, sys.argv[1:])
print(f"  1 rank : {1/one:8.1f} steps/s ({32/one:8.0f} samples/s)")
print(f"  2 ranks: {1/two:8.1f} steps/s ({64/two:8.0f} samples/s)")
print(f"  samples/s ratio 2 ranks / 1 rank: {one/two*2:.2f} (ideal 2.00)")
print(f"  communication share of a 2-rank step: {(two-one)/two:.0%}")
PY
echo "bucket sweep, 2 ranks (step time relative to dist.bucket_mb = 25):"
base=$two
for mb in 0.05 1 1000; do
  t=$(run "bucket$mb" "--nproc-per-node 2" --set "dist.bucket_mb=$mb")
  python3 -c "import sys; print(f'  bucket_mb = {sys.argv[1]:>6}: {float(sys.argv[2])/float(sys.argv[3]):.2f}x')" "$mb" "$t" "$base"
done
