"""bench/train_speed case (c) driver: training steps/s end to end from JPEG files with augmentation,
host (image_folder plugin, e2e.toml) vs torchvision ImageFolder + DataLoader (python_e2e.py),
same images, transforms, model, batch, workers and threads (bench/README.md).

    .venv-bench/bin/python bench/train_speed/run_e2e.py BUILD_DIR [--reps 2] [--root DIR]
                                                       [--plugin-dir DIR]

Run with .venv-bench's python (scripts/bench_setup): the Python side runs torch 2.14.1, the host
its own LibTorch 2.13.0. 960 JPEGs (256x256, 10 classes; 30 steps of 32) are generated once into
--root (default BUILD_DIR/bench/images_e2e). Host and Python alternate which goes first.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMAGES = HERE.parent / "image_pipeline" / "make_images.py"


def run(cmd):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(map(str, cmd))}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def host_run(build, root, plugin_dirs, tmp, channels_last):
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    run([build / "bin/host", "--config", HERE / "e2e.toml", "--output-dir", run_dir, *plugin_dirs,
         "--set", f'data.train.root="{root}"', "--set", f"run.channels_last={str(channels_last).lower()}"])
    rows = [json.loads(line) for line in open(run_dir / "history.jsonl")]
    steps = [r for r in rows if "time/step_s" in r][1:]
    step_s = statistics.median(r["time/step_s"] for r in steps)
    return 1 / step_s, statistics.median(r["time/data_wait_s"] for r in steps) / step_s


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("build", type=Path)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--root", type=Path)
    p.add_argument("--plugin-dir", action="append", default=[])
    a = p.parse_args()
    build = a.build.resolve()
    root = (a.root or build / "bench/images_e2e").resolve()
    run([sys.executable, IMAGES, root, "--count", 960])
    plugin_dirs = [x for d in a.plugin_dir for x in ("--plugin-dir", d)]
    tmp = tempfile.mkdtemp(prefix="train_speed_e2e_")
    # Two settings per side: the defaults, and channels-last (the host's run.channels_last; for
    # Python, the model and each batch in torch.channels_last), the usual CPU speed-up for CNNs.
    sides = [("host", False), ("python", False), ("host", True), ("python", True)]
    rates = {side: [] for side in sides}
    wait = []
    torch_version = ""
    for rep in range(a.reps):
        order = sides if rep % 2 == 0 else sides[::-1]
        for side in order:
            name, channels_last = side
            if name == "host":
                rate, w = host_run(build, root, plugin_dirs, tmp, channels_last)
                rates[side].append(rate)
                wait.append(w)
            else:
                text = run([sys.executable, HERE / "python_e2e.py", root, *(["--channels-last"] if channels_last else [])])
                rates[side].append(float(re.search(r"steps_per_s=([0-9.]+)", text).group(1)))
                torch_version = re.search(r"torch=(\S+)", text).group(1)
        print("  rep " + str(rep + 1) + ": " + "  ".join(
            f"{n}{' channels-last' if c else ''}={rates[(n, c)][-1]:.3f}" for n, c in sides) + " steps/s", flush=True)
    med = {side: statistics.median(v) for side, v in rates.items()}
    print()
    print(f"train_speed (c) end to end: steps/s, median of {a.reps} alternating repetitions")
    print("  small_cnn, batch 32 of RandomResizedCrop(64) + hflip + normalise from 960 JPEGs 256x256; "
          "2 loader workers, 2 intra-op threads, SGD momentum 0.9, fp32, CPU")
    print(f"{'memory format':>15} {'host':>8} {'torchvision':>12} {'host/python':>12}")
    for channels_last in (False, True):
        h, py = med[("host", channels_last)], med[("python", channels_last)]
        print(f"{'channels-last' if channels_last else 'default':>15} {h:8.3f} {py:12.3f} {h / py:12.2f}")
    print(f"host channels-last / python default: {med[('host', True)] / med[('python', False)]:.2f}; "
          f"host data wait (median): {statistics.median(wait):.1%}")
    print(f"Goal host/python >= 1.3. Python side: torch {torch_version} (LibTorch 2.14.1, .venv-bench); "
          "the host links 2.13.0.")


if __name__ == "__main__":
    main()
