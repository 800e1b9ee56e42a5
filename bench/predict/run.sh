#!/usr/bin/env bash
# host predict's memory and time against host eval on the same checkpoint and split, in one
# script (docs/predict.md): predictions stream to disk, so 10x the samples must not need 10x the
# memory, and writing rows should cost little beside the forward passes eval runs too.
#   bench/predict/run.sh [BUILD_DIR] [SAMPLES]      (defaults: build, 20000)
# Prints each run's peak RSS and wall time (GNU time) and the ratios: predict(10N)/predict(N)
# peak RSS, and predict/eval wall time at 10N. Medians of 3 alternating repetitions.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
n=${2:-20000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
host="$build/bin/host"
common=(--config configs/quickstart.toml --output-dir "$work/run" --set data.num_workers=1
        --set 'progress.mode="off"' --set data.train.size=640 --set data.train.image_size=16 --set model.image_size=16)
"$host" "${common[@]}" --set train.epochs=1 >/dev/null
measure() { # label, then host arguments; prints "label rss_kib seconds"
  local label=$1; shift
  /usr/bin/time -f "%M %e" -o "$work/time" "$host" "$@" >/dev/null
  echo "$label $(cat "$work/time")"
}
for rep in 1 2 3; do
  measure predict_n "${common[@]}" predict --checkpoint last --split test --set data.train.test_size=$n \
    --output "$work/p.npy" --format npy
  measure predict_10n "${common[@]}" predict --checkpoint last --split test --set data.train.test_size=$((10 * n)) \
    --output "$work/p.npy" --format npy
  measure eval_10n "${common[@]}" eval --checkpoint last --split test --set data.train.test_size=$((10 * n))
done | tee "$work/all"
python3 - "$work/all" "$n" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
med = lambda label, col: statistics.median(float(r[col]) for r in rows if r[0] == label)
n = int(sys.argv[2])
print(f"samples N = {n}; medians of 3")
for label in ("predict_n", "predict_10n", "eval_10n"):
    print(f"  {label:12s} peak RSS {med(label, 1) / 1024:8.1f} MiB   wall {med(label, 2):7.2f} s")
print(f"peak RSS predict(10N) / predict(N): {med('predict_10n', 1) / med('predict_n', 1):.3f}")
print(f"wall predict(10N) / eval(10N):      {med('predict_10n', 2) / med('eval_10n', 2):.3f}")
PY
