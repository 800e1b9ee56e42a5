#!/usr/bin/env bash
# GPU variant of bench/train_speed, ResNet-50 at batch 128 only: gpu_bench.py --models resnet50 (host
# eager and graphed vs Python eager and torch.compile reduce-overhead, and vs Lightning where it is
# installed; two runs each and no budget, so the compiled side compiles ResNet-50 too), after
# building the targets it needs.
#   bench/train_speed/gpu_resnet50.sh BUILD_DIR [PYTHON [OUT_DIR]]        (~5 minutes, estimated)
# Needs only a torchhost build made on this machine against its python3's torch (BUILD_DIR with
# bin/host and the resnet, basic_losses and bench_tensor_pool plugins; missing targets are built)
# and that python3 (torch with CUDA; no torchvision, no pip). What each side runs and how it is
# timed: gpu_bench.py and bench/README.md ("GPU benchmark"). The table goes to stdout and, with
# OUT_DIR, to OUT_DIR/gpu-bench.md and gpu-bench.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(realpath "${1:?usage: gpu_resnet50.sh BUILD_DIR [PYTHON [OUT_DIR]]}")
PY=${2:-python3}
for t in bin/host plugins/resnet.so plugins/basic_losses.so bench/plugins/bench_tensor_pool.so; do
  [ -e "$BUILD/$t" ] || cmake --build "$BUILD" --target host resnet basic_losses bench_tensor_pool
done
if [ -n "${3:-}" ]; then
  OUT=$3
else
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi
SIDES=host,host_graphs,python,compiled
if "$PY" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("lightning") or u.find_spec("pytorch_lightning")))'; then
  SIDES=$SIDES,lightning
fi
"$PY" bench/train_speed/gpu_bench.py --build "$BUILD" --out "$OUT" --models resnet50 --sides "$SIDES" \
  --python "$(command -v "$PY")" --budget-s 0
