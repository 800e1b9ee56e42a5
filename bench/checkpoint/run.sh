#!/usr/bin/env bash
# What a checkpoint save costs training, against torch.save in the same script (docs/hardening.md,
# "Every file the host writes"): ResNet-18 (SGD with momentum: weights + one buffer a weight, about
# 90 MB a file), 20 steps at 64 px on the CPU, saved after every step or never. The host streams
# the zip archive through the seal into the file; Python saves {"model", "optimizer"} state dicts
# with torch.save to a temporary, flush, fsync and rename (the same guarantees).
#   bench/checkpoint/run.sh [BUILD_DIR] [REPS]      (defaults: build, 3)
# Prints per side the wall time a save adds to a step ((save - none) / 20 for the host, the timed
# save for Python) and the peak RSS a save adds, medians of REPS alternating repetitions, and the
# ratios host / Python.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
reps=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
host="$build/bin/host"
python=.venv/bin/python
[ -x "$python" ] || python=python3
cat > "$work/r18.toml" <<'TOML'
[run]
seed = 1
device = "cpu"
threads = 2
[train]
epochs = 1
max_steps = 20
batch_size = 16
log_every_steps = 10
[optim]
name = "sgd"
lr = 0.01
momentum = 0.9
[data]
num_workers = 1
val_from_train = false
[data.train]
component = "org.torchhost.shapes"
size = 640
image_size = 64
[model]
component = "org.torchhost.resnet"
depth = 18
num_classes = 3
[loss]
component = "org.torchhost.cross_entropy"
[eval]
strategy = "no"
[checkpoint]
strategy = "no"
save_top_k = 0
[progress]
mode = "off"
[plots]
enabled = false
TOML
cat > "$work/py_save.py" <<'PY'
# ResNet-18 as bench/train_speed/models.py builds it, 20 SGD steps, torch.save after each when argv[2] == "1".
import os, resource, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "bench", "train_speed"))
import torch, torch.nn.functional as F, models
torch.set_num_threads(2); torch.manual_seed(1)
model = models.resnet(18, num_classes=3)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x, y = torch.rand(16, 3, 64, 64), torch.randint(0, 3, (16,))
save, seconds, out = sys.argv[2] == "1", [], sys.argv[3]
for _ in range(20):
    loss = F.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    if save:
        started = time.perf_counter()
        with open(out + ".tmp", "wb") as f:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f); f.flush(); os.fsync(f.fileno())
        os.replace(out + ".tmp", out)
        seconds.append(time.perf_counter() - started)
median = sorted(seconds)[len(seconds) // 2] if seconds else 0.0
print(f"{median} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
PY
for rep in $(seq "$reps"); do
  for mode in save none; do
    extra=(); [ "$mode" = save ] && extra=(--set 'checkpoint.strategy="steps"' --set checkpoint.every=1)
    rm -rf "$work/run"
    /usr/bin/time -f "%M %e" -o "$work/time" "$host" --config "$work/r18.toml" --output-dir "$work/run" "${extra[@]}" >/dev/null 2>&1
    echo "host_$mode $(cat "$work/time")"
    flag=0; [ "$mode" = save ] && flag=1
    echo "python_$mode $("$python" "$work/py_save.py" "$PWD" $flag "$work/py.pt")"
  done
done | tee "$work/all"
"$python" - "$work/all" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
med = lambda label, col: statistics.median(float(r[col]) for r in rows if r[0] == label)
host_ms = 1e3 * (med("host_save", 2) - med("host_none", 2)) / 20
host_mib = (med("host_save", 1) - med("host_none", 1)) / 1024
py_ms = 1e3 * med("python_save", 1)
py_mib = (med("python_save", 2) - med("python_none", 2)) / 1024
print(f"medians of {len(rows) // 4}: a save costs the host {host_ms:.0f} ms and {host_mib:+.0f} MiB of peak RSS "
      f"(peak {med('host_save', 1) / 1024:.0f} MiB), Python's torch.save {py_ms:.0f} ms and {py_mib:+.0f} MiB "
      f"(peak {med('python_save', 2) / 1024:.0f} MiB)")
print(f"host / torch.save: time {host_ms / py_ms:.2f}x")
PY
