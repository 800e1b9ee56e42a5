"""bench/train_speed driver: training steps/s of the host vs a bare LibTorch C++ loop (a) and vs a
Python eager loop (b), on the same in-memory tensors, from one invocation (bench/README.md).

    .venv/bin/python bench/train_speed/run.py BUILD_DIR [--reps 3] [--models small_cnn,resnet18]
                                              [--precisions fp32,bf16]
    .venv-bench/bin/python bench/train_speed/run.py BUILD_DIR --models efficientnet_b0,vit_b_16
        (torchvision's own models on the Python side; torch 2.14.1 there, the host's LibTorch 2.13.0)

Every repetition runs each variant once, in a rotating order, so a burst of load from other work
on the machine lands on different variants; the table shows each variant's median over the
repetitions. A run's figure is 1 / (median step time over its logging windows), the first window
(warm-up) left out: for the host from its own throughput meter (history.jsonl time/step_s, wall
time per optimizer step including waiting for data), for the loops from the same windows timed in
the loop. Process start-up, plugin loading and model creation are not timed.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# glibc malloc thresholds the host sets with mallopt at start-up (framework/src/engine/setup/runtime_setup.cpp).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}

# Shapes: small inputs so that a CPU run takes seconds. steps = timed windows + 1 warm-up window.
MODELS = {
    "small_cnn": dict(batch=16, size=64, steps=30, window=5,
                      sets=['model.component="org.torchhost.small_cnn"', "model.image_size=64"]),
    "resnet18": dict(batch=8, size=64, steps=9, window=3,
                     sets=['model.component="org.torchhost.resnet"', "model.depth=18"]),
    # The zoo's torchvision families: the Python side is torchvision's own model, so run.py must run
    # under .venv-bench's Python (torch 2.14.1 there, LibTorch 2.13.0 in the host: stated in the output).
    "efficientnet_b0": dict(batch=8, size=64, steps=25, window=5,
                            sets=['model.component="org.torchhost.efficientnet"', 'model.variant="b0"']),
    "vit_b_16": dict(batch=4, size=64, steps=25, window=5,
                     sets=['model.component="org.torchhost.vit"', 'model.variant="b_16"', "model.image_size=64"]),
}


def run(cmd, env=None):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(map(str, cmd))}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def host_run(build, sets, tmp):
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    run([build / "bin/host", "--config", HERE / "bench.toml", "--output-dir", run_dir,
         "--plugin-dir", build / "bench/plugins", *[a for s in sets for a in ("--set", s)]])
    rows = [json.loads(line) for line in open(run_dir / "history.jsonl")]
    steps = [r for r in rows if "time/step_s" in r][1:]
    step_s = statistics.median(r["time/step_s"] for r in steps)
    wait_s = statistics.median(r["time/data_wait_s"] for r in steps)
    log = (run_dir / "train.log").read_text()
    params = int(re.search(r"model \S+: (\d+) parameters", log).group(1))
    libtorch = re.search(r'^libtorch = "([^"]+)"', (run_dir / "runtime.toml").read_text(), re.M).group(1)
    return 1 / step_s, wait_s / step_s, params, libtorch


def parse_rate(text, tag):
    m = re.search(rf"{tag} steps_per_s=([0-9.]+)", text)
    return float(m.group(1)), text


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("build", type=Path)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--models", default="small_cnn,resnet18")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads, every variant (run.threads)")
    a = p.parse_args()
    build = a.build.resolve()
    python = sys.executable
    tmp = tempfile.mkdtemp(prefix="train_speed_")

    results = []
    for model in a.models.split(","):
        m = MODELS[model]
        pool = Path(tmp) / f"{model}.pool"
        run([python, HERE / "make_tensors.py", pool, 4 * m["batch"], 3, m["size"], 10])
        for precision in a.precisions.split(","):
            sets = [*m["sets"], f"train.batch_size={m['batch']}", f'amp.precision="{precision}"',
                    f"train.log_every_steps={m['window']}", f"run.threads={a.threads}", f'data.train.path="{pool}"',
                    f"data.train.size={m['batch'] * m['steps']}", f"data.train.image_size={m['size']}"]
            loop_args = ["--model", model, "--data", pool, "--batch", m["batch"], "--image-size", m["size"],
                         "--precision", precision, "--threads", a.threads, "--steps", m["steps"], "--window", m["window"]]
            py = [python, HERE / "python_loop.py", *loop_args]
            variants = {
                "host": lambda: host_run(build, sets, tmp),
                "bare": lambda: (parse_rate(run([build / "bin/train_speed_bare", "--config", HERE / "bench.toml",
                                                 "--plugin-dir", build / "bench/plugins", "--data", pool,
                                                 "--steps", m["steps"], "--window", m["window"],
                                                 *[x for s in sets for x in ("--set", s)]]), "bare")[0],),
                "python": lambda: parse_rate(run(py), "python"),
                "python_matched": lambda: parse_rate(run([*py, "--fused"], env=MALLOC_ENV), "python"),
            }
            names = list(variants)
            got = {n: [] for n in names}
            extra = {}
            for rep in range(a.reps):
                for n in names[rep % len(names):] + names[:rep % len(names)]:
                    r = variants[n]()
                    got[n].append(r[0])
                    if n == "host":
                        extra.setdefault("wait", []).append(r[1])
                        extra["host_params"] = r[2]
                        extra["libtorch"] = r[3]
                    if n == "python":
                        extra["py_params"] = int(re.search(r"params=(\d+)", r[1]).group(1))
                        extra["torch"] = re.search(r"torch=(\S+)", r[1]).group(1)
                print(f"  {model} {precision} rep {rep + 1}: " +
                      " ".join(f"{n}={got[n][-1]:.2f}" for n in names), flush=True)
            med = {n: statistics.median(v) for n, v in got.items()}
            results.append((model, precision, med, statistics.median(extra["wait"]), extra))

    print()
    print(f"train_speed: steps/s, median of {a.reps} alternating repetitions; CPU, {a.threads} intra-op threads everywhere")
    for model in a.models.split(","):
        m = MODELS[model]
        print(f"  {model}: batch {m['batch']} x 3x{m['size']}x{m['size']}, 10 classes, SGD momentum 0.9, "
              f"{m['steps'] - m['window']} timed steps per run")
    print()
    head = (f"{'model':10} {'prec':5} {'host':>8} {'bare C++':>9} {'host/bare':>10} {'python':>8} {'host/py':>8} "
            f"{'py matched':>11} {'host/pym':>9} {'data wait':>10}")
    print(head)
    print("-" * len(head))
    for model, precision, med, wait, extra in results:
        h = med["host"]
        print(f"{model:10} {precision:5} {h:8.2f} {med['bare']:9.2f} {h / med['bare']:10.3f} {med['python']:8.2f} "
              f"{h / med['python']:8.3f} {med['python_matched']:11.2f} {h / med['python_matched']:9.3f} "
              f"{wait:10.2%}")
        if extra["host_params"] != extra["py_params"]:
            print(f"  WARNING: {model} has {extra['host_params']} parameters in the host, "
                  f"{extra['py_params']} in Python: not the same architecture")
    print()
    print("host/bare: the host's speed relative to a hand-written C++ loop (same plugin model, optimizer, tensors,")
    print("  threads, malloc settings); 1 - host/bare is the host's overhead (goal <= 3%, i.e. host/bare >= 0.97).")
    print("host/py: vs a Python eager loop as a user writes it (torch.optim.SGD defaults = per-parameter loop on")
    print("  CPU, glibc malloc defaults); goal >= 1.05. py matched: the same loop with SGD(fused=True), the kernel")
    print("  the host uses, and the host's malloc thresholds (MALLOC_*_ env): what is left is the language.")
    print("data wait: share of the host's step spent waiting for the batch (stacked on the training thread).")
    print(f"Python side: torch {results[0][4]['torch']}; the host links LibTorch {results[0][4]['libtorch']}"
          " (efficientnet_b0 and vit_b_16 need torchvision, so run.py runs under .venv-bench's Python).")


if __name__ == "__main__":
    main()
