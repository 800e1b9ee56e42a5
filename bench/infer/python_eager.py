"""The Python side of bench/infer: the same ResNet-18 in torchvision eager mode, with the export's
weights (safetensors) and its evaluation preprocessing done in Python, timed as infer_bench times
the library (bench/infer/run.sh runs both, alternating):

    python_eager.py EXPORT LIST THREADS [ROUNDS] [HOST_CSV]

LIST names one image file per line. Start-up is importing torch and torchvision, building the
model and loading the weights. Then, after one warm-up image, ROUNDS rounds (default 5), each
running every file once at batch 1 and once in batches of 32, each batch decoded (PIL), resized
(shorter side, antialiased), center-cropped, normalised, stacked and run under inference_mode on
THREADS intra-op threads. Prints medians over the rounds and the peak RSS, "name value unit" a
line as infer_bench does, and with HOST_CSV (`host predict --images` on the same LIST at batch 32)
the largest logit difference from the host's, which shows the Python side computes the same
function (decoders and kernels may differ in the last bits).
"""
import csv
import json
import resource
import statistics
import sys
import time

started = time.perf_counter()
import torch  # noqa: E402  (the import is part of the start-up being timed)
import torchvision  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from torchvision.transforms import v2  # noqa: E402


def open_model(export):
    """torchvision's ResNet of the export's depth and classes, its weights, its preprocessing."""
    with safe_open(export, "pt") as f:
        meta = f.metadata()
    options = json.loads(meta["torchhost.model"])["options"]
    prep = json.loads(meta["torchhost.preprocessing"])["options"]
    model = getattr(torchvision.models, f"resnet{options['depth']}")(num_classes=options["num_classes"])
    model.load_state_dict(load_file(export), strict=True)
    model.eval()
    transform = v2.Compose([
        v2.PILToTensor(),
        v2.Resize(prep["resize"], antialias=True),
        v2.CenterCrop(prep["center_crop"]),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(prep["mean"], prep["std"]),
    ])
    return model, transform


def run_batch(model, transform, files):
    """Logits of `files`, decoded and prepared here, as one batch."""
    images = [transform(Image.open(path).convert("RGB")) for path in files]
    with torch.inference_mode():
        return model(torch.stack(images))


def run_batches(model, transform, files, size):
    """Seconds per batch of `size` files (the last may be shorter)."""
    times = []
    for at in range(0, len(files), size):
        start = time.perf_counter()
        run_batch(model, transform, files[at:at + size])
        times.append(time.perf_counter() - start)
    return times


def largest_logit_difference(model, transform, files, host_csv):
    with open(host_csv, newline="") as f:
        rows = {row["path"]: row for row in csv.DictReader(f)}
    largest = 0.0
    for at in range(0, len(files), 32):
        logits = run_batch(model, transform, files[at:at + 32])
        for path, row in zip(files[at:at + 32], logits.tolist()):
            host = [float(rows[path][f"logits.{c}"]) for c in range(len(row))]
            largest = max(largest, max(abs(a - b) for a, b in zip(row, host)))
    return largest


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: python_eager.py EXPORT LIST THREADS [ROUNDS] [HOST_CSV]")
    export, listing, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    torch.set_num_threads(threads)
    files = [line.strip() for line in open(listing) if line.strip()]
    model, transform = open_model(export)
    print(f"startup_open {time.perf_counter() - started:.3f} s")
    run_batch(model, transform, files[:1])  # the first forward allocates and picks kernels: not a figure
    latency1, throughput1, latency32, throughput32 = [], [], [], []
    for _ in range(rounds):
        one = run_batches(model, transform, files, 1)
        latency1.append(statistics.median(one))
        throughput1.append(len(files) / sum(one))
        many = run_batches(model, transform, files, 32)
        latency32.append(statistics.median(many))
        throughput32.append(len(files) / sum(many))
    print(f"batch1_latency {1e3 * statistics.median(latency1):.2f} ms")
    print(f"batch1_throughput {statistics.median(throughput1):.1f} images/s")
    print(f"batch32_latency {1e3 * statistics.median(latency32):.2f} ms")
    print(f"batch32_throughput {statistics.median(throughput32):.1f} images/s")
    print(f"peak_rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")
    if len(sys.argv) > 5:
        print(f"max_logit_diff {largest_logit_difference(model, transform, files, sys.argv[5]):.3g} abs")


if __name__ == "__main__":
    main()
