#!/usr/bin/env bash
# A CUDA build of the host on a machine without a GPU (CI's CUDA tree, a GPU-less login node):
#   - run.device = "auto" trains on the CPU, as the CPU build does: exit 0, the model is placed on the
#     cpu, and runtime.toml's provenance shows a CUDA build (the NCCL version, which only a CUDA
#     LibTorch has; its `cuda` entry stays empty without a GPU, docs/hardening.md section 7);
#   - run.device = "cuda" is refused before anything is written: exit 2 (a configuration error), one
#     paragraph that names the key, says why and what to set instead.
# Args: <build dir>. Where a GPU is visible the `gpu` label covers this build, and this test says so
# and exits 77 (ctest's SKIP_RETURN_CODE).
set -euo pipefail
build=$1
host="$build/bin/host"
work="$build/test-runs/cuda_build_no_gpu"
rm -rf "$work"
mkdir -p "$work"
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null; then
  echo "a GPU is visible: this machine runs the gpu label (ctest -L gpu) instead"
  exit 77
fi
fail() { echo "FAILED: $1"; exit 1; }
# One short epoch of the quickstart: enough to show the CUDA build trains where there is no GPU.
short=(--config configs/quickstart.toml --set train.epochs=1 --set data.train.size=512 --set data.train.val_size=128
       --set progress.mode=\"off\" --set plots.enabled=false)
cd "$(dirname "$0")/../.."

status=0
"$host" "${short[@]}" --set run.device=\"auto\" --output-dir "$work/auto" >"$work/auto.log" 2>&1 || status=$?
cat "$work/auto.log"
[ "$status" -eq 0 ] || fail "run.device = \"auto\" exited $status, expected 0"
grep -qE "model org\.torchhost\.small_cnn: .* on cpu$" "$work/auto.log" ||
  fail "run.device = \"auto\": the log does not say the model was placed on the cpu"
grep -qE "^nccl = '[0-9]+\.[0-9]+" "$work/auto/runtime.toml" ||
  fail "runtime.toml records no NCCL version: this host is not a CUDA build"
[ -f "$work/auto/checkpoints/last.pt" ] || fail "run.device = \"auto\" left no checkpoints/last.pt"

status=0
"$host" "${short[@]}" --set run.device=\"cuda\" --output-dir "$work/cuda" >"$work/cuda.log" 2>&1 || status=$?
cat "$work/cuda.log"
[ "$status" -eq 2 ] || fail "run.device = \"cuda\" exited $status, expected 2 (a configuration error)"
grep -q 'run.device' "$work/cuda.log" || fail "the refusal does not name the key run.device"
grep -q 'finds no GPU' "$work/cuda.log" || fail "the refusal does not say that this CUDA LibTorch finds no GPU"
grep -q '"cpu" or "auto"' "$work/cuda.log" || fail "the refusal does not say what to set instead"
[ ! -e "$work/cuda/checkpoints" ] || fail "the refused run wrote checkpoints"
echo "ok: a CUDA build without a GPU trains with run.device = \"auto\" on the cpu and refuses \"cuda\" with exit 2"
