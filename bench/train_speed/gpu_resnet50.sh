#!/usr/bin/env bash
# GPU variant of bench/train_speed: ResNet-50 training images/s, host vs Python eager, bf16
# autocast, batch 128 at 224x224, synthetic in-memory tensors, channels-last, cuDNN benchmark.
#   bench/train_speed/gpu_resnet50.sh BUILD_DIR [PYTHON]        (~2 minutes)
# Needs only a torchhost build made on this machine against its python3's torch (BUILD_DIR with
# bin/host and the resnet, basic_losses and bench_tensor_pool plugins; missing targets are built)
# and that python3 (torch with CUDA; no torchvision, no pip). Host side: gpu_resnet50.toml, data
# from the tensor_pool plugin's generated pool (stacked by 6 loader threads into pinned memory and
# copied with non_blocking, as any host run). Python side: python_loop.py, the same model
# (models.py, torchvision's ResNet-50 layout), SGD momentum 0.9 (PyTorch's default foreach
# implementation on CUDA; the host uses LibTorch's fused SGD), a pinned pool copied non_blocking
# each step. Both: 100 steps, windows of 10, the first window left out, median window.
# The two sides alternate, twice each.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(realpath "${1:?usage: gpu_resnet50.sh BUILD_DIR [PYTHON]}")
PY=${2:-python3}
for t in bin/host plugins/resnet.so plugins/basic_losses.so bench/plugins/bench_tensor_pool.so; do
  [ -e "$BUILD/$t" ] || cmake --build "$BUILD" --target host resnet basic_losses bench_tensor_pool
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

host_run() { # prints steps/s: 1 / median time/step_s after the first logging window
  "$BUILD/bin/host" --config bench/train_speed/gpu_resnet50.toml --output-dir "$OUT/host$1" \
    --plugin-dir "$BUILD/bench/plugins" > "$OUT/host$1.log" 2>&1 || { cat "$OUT/host$1.log"; exit 1; }
  "$PY" - "$OUT/host$1/history.jsonl" <<'PY'
import json, statistics, sys
t = [json.loads(l)["time/step_s"] for l in open(sys.argv[1]) if '"time/step_s"' in l][1:]
print(1 / statistics.median(t))
PY
}
py_run() {
  (cd bench/train_speed && "$PY" python_loop.py --model resnet50 --classes 1000 --batch 128 --image-size 224 \
     --precision bf16 --device cuda --steps 100 --window 10 --pool 256 --lr 0.1 --channels-last --cudnn-benchmark) \
    | sed -n 's/.*steps_per_s=\([0-9.]*\).*/\1/p'
}

h1=$(host_run 1); p1=$(py_run); p2=$(py_run); h2=$(host_run 2)
"$PY" - "$h1" "$h2" "$p1" "$p2" <<'PY'
import statistics, sys, torch
h1, h2, p1, p2 = map(float, sys.argv[1:])
host, py = statistics.median([h1, h2]) * 128, statistics.median([p1, p2]) * 128
print(f"ResNet-50, bf16 autocast, batch 128 x 3x224x224, channels-last, SGD momentum 0.9, {torch.cuda.get_device_name()}")
print(f"  host   : {host:8.1f} images/s   (runs: {h1 * 128:.1f}, {h2 * 128:.1f})")
print(f"  python : {py:8.1f} images/s   (runs: {p1 * 128:.1f}, {p2 * 128:.1f}; torch {torch.__version__}, eager)")
print(f"  host / python: {host / py:.3f}")
PY
