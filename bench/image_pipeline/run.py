"""bench/image_pipeline driver: images/s of the host's data loader with the image_folder plugin vs
torchvision ImageFolder + DataLoader, same JPEG folder, transforms, batch and worker count, from
one invocation (bench/README.md).

    .venv-bench/bin/python bench/image_pipeline/run.py BUILD_DIR [--workers 1,2] [--reps 3]
                                                       [--root DIR] [--plugin-dir DIR]

The folder (2000 JPEGs, 256x256, 10 classes) is generated once into --root (default
BUILD_DIR/bench/images). Each repetition runs host and Python once per worker count, alternating
which goes first; the table shows medians over the repetitions.
"""
import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(cmd):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(map(str, cmd))}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("build", type=Path)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per run (after one warm-up epoch)")
    p.add_argument("--root", type=Path)
    p.add_argument("--plugin-dir", action="append", default=[])
    a = p.parse_args()
    build = a.build.resolve()
    root = a.root or build / "bench/images"
    run([sys.executable, HERE / "make_images.py", root])
    common = ["--batch", a.batch, "--size", a.size, "--epochs", a.epochs]
    plugin_dirs = [x for d in a.plugin_dir for x in ("--plugin-dir", d)]

    rows = []
    versions = ""
    # The recipe row: RandAugment(2, 9) on 8-bit pixels after the flip, RandomErasing(0.25) after
    # normalisation, on both sides.
    augment_host = ["--set", "data.train.rand_augment=[2, 9]", "--set", "data.train.random_erasing=0.25"]
    variants = [("plain", [], []), ("augmented", augment_host, ["--augment"])]
    for (variant, host_extra, python_extra), workers in [(v, w) for v in variants for w in map(int, a.workers.split(","))]:
        host = [build / "bin/image_pipeline_bench", "--root", root, "--workers", workers, *common, *plugin_dirs,
                *host_extra]
        python = [sys.executable, HERE / "python_pipeline.py", root, "--workers", workers, *common, *python_extra]
        got = {"host": [], "python": []}
        for rep in range(a.reps):
            order = [("host", host), ("python", python)]
            for name, cmd in order if rep % 2 == 0 else order[::-1]:
                text = run(cmd)
                got[name].append(float(re.search(r"images_per_s=([0-9.]+)", text).group(1)))
                if name == "python":
                    versions = re.search(r"torch=.*", text).group(0)
            print(f"  {variant} workers {workers} rep {rep + 1}: host={got['host'][-1]:.1f} "
                  f"python={got['python'][-1]:.1f}", flush=True)
        rows.append((variant, workers, statistics.median(got["host"]), statistics.median(got["python"])))

    print()
    print(f"image_pipeline: images/s, median of {a.reps} alternating repetitions x {a.epochs} timed epochs")
    print(f"  2000 JPEGs 256x256 (q90, ~20 KB), 10 classes; RandomResizedCrop({a.size}) + hflip 0.5 + normalise; "
          f"batch {a.batch}, shuffled")
    print()
    print(f"  augmented: + RandAugment(2, 9) after the flip, RandomErasing(0.25) after normalise")
    print()
    print(f"{'transforms':>10} {'workers':>7} {'host':>9} {'torchvision':>12} {'host/python':>12}")
    for variant, workers, h, py in rows:
        print(f"{variant:>10} {workers:7d} {h:9.1f} {py:12.1f} {h / py:12.2f}")
    print()
    print("host: framework DataLoader (worker threads, collate in the workers) + image_folder (OpenCV decode/augment).")
    print("torchvision: ImageFolder (PIL) + DataLoader (worker processes, persistent_workers=True). Goal host/python >= 1.5.")
    print(f"Python side: {versions} (LibTorch 2.14.1, from .venv-bench; the host links 2.13.0).")


if __name__ == "__main__":
    main()
