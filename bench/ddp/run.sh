#!/usr/bin/env bash
# Data-parallel benchmark (not a timed test): steps/s and communication share, 1 vs 2 Gloo ranks
# on this machine, overlap on/off, and a bucket-size sweep, per model.
#   bench/ddp/run.sh [BUILD_DIR] [MODEL...]     models: small_cnn (default), resnet18
#   e.g. STEPS=40 bench/ddp/run.sh build small_cnn resnet18
#   PLUGIN_DIR=DIR adds --plugin-dir DIR (e.g. a build whose plugins/ has resnet.so)
# Every rank gets one intra-op thread (run.threads = 1) and batch 32 of 64x64 images, so 1 rank
# and 2 ranks do the same per-rank work; what a 2-rank step costs beyond a 1-rank step is
# communication (plus contention for the machine: 2 ranks need 2 free cores). Overlap off
# (dist.overlap = false) all-reduces the same buckets after backward instead of during it, so
# (off - 1 rank) is the whole communication time and (on - 1 rank) what overlap leaves exposed.
# Times are medians over logging windows of 5 steps after the first; printed as ratios.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
shift || true
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(small_cnn)
STEPS=${STEPS:-30}
HOST="$BUILD/bin/host"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

model_sets() {
  case $1 in
    small_cnn) echo 'model.component="org.torchhost.small_cnn" model.image_size=64' ;;
    resnet18) echo 'model.component="org.torchhost.resnet" model.depth=18 model.num_classes=3' ;;
    *) echo "unknown model $1 (small_cnn, resnet18)" >&2; exit 2 ;;
  esac
}

# Median time/step_s of the step records after the first (warm-up) logging window.
step_time() {
  python3 - "$1/history.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = [r["time/step_s"] for r in rows if "time/step_s" in r][1:]
print(statistics.median(t) if t else float("nan"))
PY
}

run() { # name, ranks, model, extra key=value...
  local name=$1 ranks=$2 model=$3 launch=""
  shift 3
  [ "$ranks" -gt 1 ] && launch="--nproc-per-node $ranks"
  local sets=(--set "data.train.size=$((32 * ranks * STEPS))" --set data.train.image_size=64)
  for kv in $(model_sets "$model") "$@"; do sets+=(--set "$kv"); done
  [ -z "${PLUGIN_DIR:-}" ] || sets+=(--plugin-dir "$PLUGIN_DIR")
  # shellcheck disable=SC2086
  "$HOST" $launch --config bench/ddp/bench.toml --output-dir "$OUT/$name" "${sets[@]}" > "$OUT/$name.log" 2>&1 ||
    { cat "$OUT/$name.log" >&2; exit 1; }
  step_time "$OUT/$name"
}

for model in "${MODELS[@]}"; do model_sets "$model" > /dev/null; done # unknown names fail here
echo "bench/ddp: $(nproc) cores, $STEPS steps per run, batch 32 x 64x64 per rank, 1 thread per rank, Gloo"
for model in "${MODELS[@]}"; do
  one=$(run "$model-one" 1 "$model")
  on=$(run "$model-on" 2 "$model")
  off=$(run "$model-off" 2 "$model" dist.overlap=false)
  sweep=()
  for mb in 1 5 100; do sweep+=("$mb" "$(run "$model-b$mb" 2 "$model" "dist.bucket_mb=$mb")"); done
  python3 - "$model" "$one" "$on" "$off" "${sweep[@]}" <<'PY'
import sys
model, one, on, off = sys.argv[1], *map(float, sys.argv[2:5])
sweep = dict(zip(sys.argv[5::2], map(float, sys.argv[6::2])))
sweep["25"] = on
print(f"{model}:")
print(f"  1 rank              : {1/one:7.2f} steps/s  {32/one:7.1f} samples/s")
print(f"  2 ranks, overlap on : {1/on:7.2f} steps/s  {64/on:7.1f} samples/s  speed-up {2*one/on:.2f} (ideal 2.00)")
print(f"  2 ranks, overlap off: {1/off:7.2f} steps/s  {64/off:7.1f} samples/s  speed-up {2*one/off:.2f}")
print(f"  communication share of a 2-rank step: overlap off {max(off-one,0)/off:.0%}, on (exposed) {max(on-one,0)/on:.0%}")
print(f"  overlap on / off step time: {on/off:.2f}")
print("  bucket sweep, 2 ranks, step time relative to dist.bucket_mb = 25: " +
      ", ".join(f"{mb} MB {sweep[mb]/on:.2f}" for mb in ("1", "5", "25", "100")))
PY
done
