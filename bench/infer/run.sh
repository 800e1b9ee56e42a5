#!/usr/bin/env bash
# The inference library against `host predict --images` and against the same model in Python eager
# mode on the CPU, same export, same files (docs/deployment.md section 4): ResNet-18 at 224x224
# (resize 256, center crop 224, ImageNet normalisation) from 256x256 JPEGs, trained one step so
# that an export exists.
#   bench/infer/run.sh [BUILD_DIR] [IMAGES]      (defaults: build, 64)
# Prints, medians of 3 alternating repetitions: host predict's wall time and peak RSS at
# eval.batch_size 32 and 1 and on one image (its start-up), end to end as a user runs it; the
# library's start-up (Model::open), latency and images/s at batch 1 and 32 with the model open,
# and its peak RSS; the same for Python (python_eager.py: torchvision's resnet18 with the export's
# weights, PIL decode and torchvision transforms, in .venv-bench: torch 2.14.1, where the library
# runs the host's LibTorch 2.13.0; its start-up includes importing torch), with its largest logit
# difference from host predict's; the ratios at batch 1 and 32. Every side uses every core for
# LibTorch's intra-op threads (the host: run.threads = nproc; data.num_workers = 1 decodes beside
# the model; the library decodes on its intra-op threads before the model runs, Python on the
# calling thread).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
n=${2:-64}
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
host="$build/bin/host"
python=.venv-bench/bin/python
[ -x "$python" ] || { echo "bench/infer: no $python; run scripts/bench_setup (torch and torchvision for the Python side)"; exit 1; }
cmake --build "$build" --target infer_bench host image_folder vision_models basic_losses basic_metrics >/dev/null
.venv/bin/python bench/image_pipeline/make_images.py "$work/images" --count "$n" --classes 2 --size 256
cat >"$work/run.toml" <<TOML
[run]
name = "infer_bench"
seed = 1
device = "cpu"
threads = $cores
[train]
epochs = 1
max_steps = 1
batch_size = 8
[eval]
batch_size = 32
[data]
num_workers = 1
[data.train]
component = "org.torchhost.image_folder"
root = "$work/images"
val_root = "$work/images"
resize = [256]
center_crop = [224, 224]
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
[model]
component = "org.torchhost.resnet"
depth = 18
num_classes = 2
[loss]
component = "org.torchhost.cross_entropy"
[progress]
mode = "off"
TOML
"$host" train --config "$work/run.toml" --output-dir "$work/run" >/dev/null 2>&1
"$host" export --checkpoint "$work/run/checkpoints/last.pt" --format safetensors --output "$work/model.safetensors" >/dev/null
find "$work/images" -name '*.jpg' | sort >"$work/list.txt"
head -n 1 "$work/list.txt" >"$work/one.txt"
predict() { # label, list, batch size: prints "label rss_kib seconds"
  /usr/bin/time -f "%M %e" -o "$work/time" "$host" predict --config "$work/run.toml" --output-dir "$work/run" \
    --checkpoint last --images "$2" --set eval.batch_size="$3" --output "$work/$1.csv" >/dev/null 2>&1
  echo "$1 $(cat "$work/time")"
}
for rep in 1 2 3; do
  predict host_b32 "$work/list.txt" 32
  predict host_b1 "$work/list.txt" 1
  predict host_one "$work/one.txt" 1
  "$build/bin/infer_bench" "$work/model.safetensors" "$build/plugins" "$work/list.txt" 3 2>/dev/null |
    awk '{print "lib_" $1, $2}'
  "$python" bench/infer/python_eager.py "$work/model.safetensors" "$work/list.txt" "$cores" 3 "$work/host_b32.csv" |
    awk '{print "py_" $1, $2}'
done | tee "$work/all" >/dev/null
torch_version=$("$python" -c 'import torch, torchvision; print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")')
python3 - "$work/all" "$n" "$cores" "$torch_version" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
n, cores = int(sys.argv[2]), sys.argv[3]
med = lambda label, col=1: statistics.median(float(r[col]) for r in rows if r[0] == label)
print(f"ResNet-18, 224x224 from 256x256 JPEGs, {n} images, CPU, {cores} intra-op threads; medians of 3")
for label, what in (("host_b32", "eval.batch_size 32"), ("host_b1", "eval.batch_size 1"), ("host_one", "one image")):
    wall = med(label, 2)
    rate = "" if label == "host_one" else f"   {n / wall:6.1f} images/s end to end"
    print(f"  host predict --images, {what:18s} wall {wall:6.2f} s   peak RSS {med(label) / 1024:7.1f} MiB{rate}")
print(f"  library start-up (Model::open)       {med('lib_startup_open'):6.3f} s")
print(f"  library batch 1                      {med('lib_batch1_latency'):6.1f} ms per image, {med('lib_batch1_throughput'):6.1f} images/s")
print(f"  library batch 32                     {med('lib_batch32_latency'):6.1f} ms per batch, {med('lib_batch32_throughput'):6.1f} images/s")
print(f"  library peak RSS                     {med('lib_peak_rss'):6.1f} MiB")
steady = (n - 1) / (med('host_b32', 2) - med('host_one', 2))  # the start-up and first image taken off
print(f"  host predict at 32 less its start-up  {steady:6.1f} images/s ((N - 1) / (wall at 32 - wall of one image))")
print(f"library at 32 / host predict at 32: {med('lib_batch32_throughput') / (n / med('host_b32', 2)):.2f}x end to end, "
      f"{med('lib_batch32_throughput') / steady:.2f}x less start-up (the library decodes before the model runs, "
      "host predict on a loader worker beside the model)")
print(f"  Python eager start-up (import, model, weights) {med('py_startup_open'):6.3f} s   ({sys.argv[4]})")
print(f"  Python eager batch 1                 {med('py_batch1_latency'):6.1f} ms per image, {med('py_batch1_throughput'):6.1f} images/s")
print(f"  Python eager batch 32                {med('py_batch32_latency'):6.1f} ms per batch, {med('py_batch32_throughput'):6.1f} images/s")
print(f"  Python eager peak RSS                {med('py_peak_rss'):6.1f} MiB; largest logit difference from host predict {max(float(r[1]) for r in rows if r[0] == 'py_max_logit_diff'):.3g}")
print(f"library / Python eager: {med('lib_batch1_throughput') / med('py_batch1_throughput'):.2f}x at batch 1, "
      f"{med('lib_batch32_throughput') / med('py_batch32_throughput'):.2f}x at batch 32 (images/s, model open, decode included)")
PY
