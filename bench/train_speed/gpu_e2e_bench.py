"""GPU training end to end from JPEG files: ResNet-50 and ResNet-18 at 224x224, batch 256, bf16
autocast, channels-last, cuDNN benchmark, SGD momentum 0.9 (fused), RandomResizedCrop(224) +
hflip(0.5) + ImageNet normalisation, on the ImageNet-like set of
bench/image_pipeline/make_imagenet_like.py (8000 JPEGs, 100 classes; a folder and the same bytes
as WebDataset shards). bench/README.md, "GPU end to end".

    python3 bench/train_speed/gpu_e2e_bench.py --build BUILD --out DIR --data ROOT [--budget-s 170]
        [--models resnet18,resnet50] [--sides host_jpeg_gpu,host_jpeg_gpu_share,host_jpeg,host_pool,host_shards_gpu,
        python_tv,host_shards,python_nvjpeg] [--rates host,python] [--runs 2] [--batch 256] [--size 224]
        [--workers N] [--loader-threads 4] [--cpu-share 0.2] [--device cuda] [--prepare] [--dry-run]
    CPU smoke test (bench/README.md): --device cpu --prepare --count 200 --classes 10 --batch 16
        --size 64 --epochs 2 --window 3 --workers 2 --budget-s 0 (the GPU-decode sides: not run)

Sides, each run its own process (its own session: a timeout or SIGTERM ends it with its
children), rounds alternating the order (reversed every other round, python_tv always after the
GPU-decode sides), the median of the rounds:
  host_jpeg_gpu  host_jpeg with --set data.decode="gpu": image_folder hands over the JPEG bytes and
                 the crop, the host decodes them with nvJPEG (batched, on the GPU's JPEG engines)
                 and crops/resizes/flips/normalises in one CUDA kernel on the loader threads;
                 --loader-threads threads (default 4, the goal being at most 4 cores busy); notes:
                 runtime.toml's [decode] train state, train.log's count of images decoded each way
                 (on --device cpu not run: the host would exit 2)
  host_jpeg      bin/host train, gpu_e2e_resnet.toml, org.torchhost.image_folder on ROOT (its
                 defaults: fast_decode on), --workers loader threads (default cores - 2)
  host_jpeg_gpu_share  host_jpeg_gpu with data.decode_cpu_share = --cpu-share (default 0.2): each
                 batch's last rows decoded on the CPU path by the loader thread while the engines
                 decode the rest (the same notes)
  host_shards_gpu  host_shards with data.decode="gpu", --loader-threads threads (the same notes)
  host_shards    host_jpeg over org.torchhost.webdataset on ROOT-shards/train-*.tar (only where
                 BUILD/plugins/webdataset.so exists)
  host_pool      the same model and batch from the synthetic in-memory pool
                 (org.torchhost.bench.tensor_pool, gpu_resnet50.toml): host_jpeg / host_pool is
                 what loading JPEGs costs
  python_tv      torchvision ImageFolder + DataLoader (--workers processes, PIL decodes fully)
                 and the same model in plain torch (gpu_e2e_sides.py train --side tv)
  python_nvjpeg  file bytes from DataLoader workers, decoded batched on the GPU with
                 torchvision.io.decode_jpeg(device="cuda"), transforms on the GPU
                 (gpu_e2e_sides.py train --side nvjpeg)
and the decode rates: rate_host (BUILD/bin/image_pipeline_bench, 1 loader thread, batch 64, over
--rate-images files), rate_python (PIL in one DataLoader worker; GPU decode_jpeg in batches of
256, decode only and decode + transforms: gpu_e2e_sides.py decode), rate_gpu (BUILD/bin/gpu_decode_bench:
the host's nvJPEG decoder over every file, decode only, --loader-threads threads of --batch images,
per backend: the JPEG engines whole and as regions, the CUDA decoder).

Every training run: --epochs epochs (2) of count // batch steps (drop_last), windows of --window
steps (the host's train.log_every_steps); images/s = batch / median window step time over the
windows of the second epoch on (the first epoch is warm-up: cuDNN autotuning, and the loader
filling its queue while the GPU autotunes, which would flatter a loader-bound side), the
window holding the epoch boundary's refill among them. Also per run: the data-wait fraction
(median over the same windows of wait / step time; the host's time/data_wait_s, the Python
sides' time blocked on their feed), the CPU cores busy (the run's process tree's user + system
CPU time from /proc, over the timed windows' span and over the whole run), the loader threads.

The plan: priorities (Bench.priority: round 1 of host_jpeg_gpu, host_jpeg, host_pool,
host_shards_gpu and python_tv first, in that order, model by model in --models order), a run
starting only if its estimate (start-up, cuDNN autotuning, steps at the slower of the GPU step and
the loader's rate, the GPU-decode sides' at the GPU step plus nvJPEG's start; scaled by what the
runs of its kind took so far) fits in what is left of --budget-s. The report: images/s per side,
GPU decode / pool (goal >= 0.95), / torchvision (goal >= 1.5 on ResNet-18), / CPU decode, and
the cores busy (goal <= 4). DIR/gpu-e2e.md (also printed) and DIR/gpu-e2e.json are written after every run and on SIGTERM. A failing side is recorded with the
last 20 lines of its output and the others go on. Needs only this interpreter's standard
library; the Python sides run in subprocesses (--python: torch and torchvision).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import kernel_breakdown
from bench_runs import ROOT, PlannedBench, gpu_name_and_driver, log, tail, utc_now

HERE = Path(__file__).resolve().parent
GENERATOR = ROOT / "bench/image_pipeline/make_imagenet_like.py"
# The order within a round (the plan's, for the same priority): the GPU-decode sides first.
SIDES = ("host_jpeg_gpu", "host_jpeg_gpu_share", "host_jpeg", "host_pool", "host_shards_gpu", "python_tv", "host_shards",
         "python_nvjpeg")
# round 1 of these first
MAIN = ("host_jpeg_gpu", "host_jpeg_gpu_share", "host_jpeg", "host_pool", "host_shards_gpu", "python_tv")
GPU_DECODE = ("host_jpeg_gpu", "host_jpeg_gpu_share", "host_shards_gpu")  # data.decode = "gpu", --loader-threads threads
# the same source decoded on the CPU
CPU_OF = {"host_jpeg_gpu": "host_jpeg", "host_jpeg_gpu_share": "host_jpeg", "host_shards_gpu": "host_shards"}
COLUMNS = ("host_jpeg_gpu", "host_jpeg_gpu_share", "host_shards_gpu", "host_jpeg", "host_shards", "host_pool", "python_tv",
           "python_nvjpeg")
RATES = ("rate_host", "rate_python", "rate_gpu")
LABELS = {"host_jpeg_gpu": "host, JPEG folder, GPU decode", "host_shards_gpu": "host, shards, GPU decode",
          "host_jpeg_gpu_share": "host, JPEG folder, GPU decode + CPU share",
          "host_jpeg": "host, JPEG folder", "host_shards": "host, shards", "host_pool": "host, memory pool",
          "python_tv": "torchvision", "python_nvjpeg": "torchvision + nvJPEG", "rate_host": "host decode rate",
          "rate_python": "Python decode rates", "rate_gpu": "host nvJPEG decode rates"}
HOST_SIDES = ("host_jpeg_gpu", "host_jpeg_gpu_share", "host_jpeg", "host_shards_gpu", "host_shards", "host_pool")
# Cost model, seconds on one H100/H200 (bench/gpu/: ResNet-50 b256 eager 57 ms/step and ~8 s of
# first-use costs on the H200; the rest estimated): GPU step at batch 256, 224x224, bf16.
MODELS = {"resnet50": dict(depth=50, step_ms=57.0, warmup_s=8.0), "resnet18": dict(depth=18, step_ms=22.0, warmup_s=5.0)}
STARTUP_S = {"host": 2.0, "python": 9.0}  # to the first step: the host's start; import torch + CUDA
WORKERS_START_S = 2.0  # DataLoader worker processes (fork) and their first batches
RATE_PER_THREAD = {"host": 350.0, "python": 180.0}  # images/s per loader thread/process, estimated
NVJPEG_MS = 30.0  # per batch of 256 on the GPU beside the step (estimated)
# data.decode = "gpu": the decode is off the CPU, so steps at the GPU's rate unless the JPEG engines
# are slower (batched decode_jpeg on the H200: 11,859 images/s decode only, on one core), and
# nvJPEG's start (its handles, the hardware decoder, per loader thread); both estimated.
GPU_DECODE_RATE = 12000.0
GPU_DECODE_START_S = 1.0
GPU_DECODE_CORES = 4  # the goal: at most 4 cores busy at the memory pool's rate
EPOCH_STALL_S = 1.0  # the loader's refill at an epoch's start
RATE_IMAGES = 640  # decode rates: files (10 batches of 64)
MEAN_STD = "mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225]"
POLL_S = 0.1  # /proc sampling of a run's processes


def skipped(rec):
    return rec.get("error", "").startswith(("skipped", "not run", "not built"))


def listing(root):
    """ImageFolder's order: sorted class folders, sorted files in each: [(relative path, label)]."""
    out = []
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    for label, c in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(Path(root) / c, followlinks=True)):
            for f in sorted(files):
                if f.lower().endswith((".jpg", ".jpeg")):
                    out.append((os.path.relpath(Path(dirpath) / f, root), label))
    return out, len(classes)


class ProcessTree:
    """CPU seconds (user + system) of every process in one session, read from /proc: a full scan
    finds the session's processes now and then, the known ones are read every poll; a process
    that exits keeps its last reading (its CPU time stays counted)."""

    TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def __init__(self, sid):
        self.sid = sid
        self.ticks = {}  # pid -> last utime + stime
        self.polls = 0

    @staticmethod
    def stat(pid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return int(fields[3]), int(fields[11]) + int(fields[12])  # session, utime + stime
        except (OSError, IndexError, ValueError):
            return None

    def sample(self):
        if self.polls % 10 == 0:
            try:
                pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            except OSError:
                pids = []
            for pid in pids:
                if pid not in self.ticks:
                    got = self.stat(pid)
                    if got and got[0] == self.sid:
                        self.ticks[pid] = got[1]
        self.polls += 1
        for pid in list(self.ticks):
            got = self.stat(pid)
            if got and got[0] == self.sid:
                self.ticks[pid] = max(self.ticks[pid], got[1])
        return sum(self.ticks.values()) / self.TICK


class Bench(PlannedBench):
    REPORT, TITLE, SCRIPT = "gpu-e2e", "GPU end-to-end benchmark", "gpu_e2e_bench.py"

    def __init__(self, a):
        super().__init__(a, "gpu_e2e_")  # results: model (or "decode") -> side -> [run records]
        self.info = {"cores": len(os.sched_getaffinity(0)), "loader_threads": a.workers,
                     "gpu_decode_loader_threads": a.loader_threads}
        self.data = self.read_data()

    # ---- the data set ----
    def read_data(self):
        a = self.a
        d = {"root": str(a.data), "shards_dir": str(a.data) + "-shards"}
        try:
            marker = json.loads((a.data / "imagenet_like.json").read_text())
            d.update(marker.get("stats", {}))
        except (OSError, ValueError):
            pass
        if a.data.is_dir():
            files, classes = listing(a.data)
            d.update(count=len(files), classes=classes)
            self.files = files
        else:
            d.update(count=a.count, classes=a.classes, missing=True)
            self.files = []
        n = 0  # train-000000.tar, train-000001.tar, ... as long as they run on
        while (Path(d["shards_dir"]) / f"train-{n:06d}.tar").exists():
            n += 1
        d["shard_files"] = n
        if n:
            d["shards_pattern"] = str(Path(d["shards_dir"]) / f"train-{{000000..{n - 1:06d}}}.tar")
        return d

    def steps_per_epoch(self):
        return self.data["count"] // self.a.batch

    # ---- commands ----
    def threads(self, side):
        """The side's loader threads (data.num_workers)."""
        return self.a.loader_threads if side in GPU_DECODE else self.a.workers

    def host_sets(self, model, side):
        a, d = self.a, self.data
        sets = [f"model.depth={MODELS[model]['depth']}", f"model.num_classes={d['classes']}",
                f"train.batch_size={a.batch}", f"train.epochs={a.epochs}", f"train.log_every_steps={a.window}",
                "train.drop_last=true", f"data.num_workers={self.threads(side)}", f"data.prefetch={a.prefetch}"]
        if side == "host_pool":
            sets += [f"data.train.size={self.steps_per_epoch() * a.batch}", f"data.train.image_size={a.size}",
                     f"data.train.num_classes={d['classes']}"]
        else:
            sets.append(f"data.train.random_resized_crop=[{a.size}]")
            if CPU_OF.get(side, side) == "host_jpeg":
                sets.append(f'data.train.root="{d["root"]}"')
            else:
                sets += ['data.train.component="org.torchhost.webdataset"',
                         f'data.train.shards="{d.get("shards_pattern", "")}"']
        if side in GPU_DECODE:
            sets.append('data.decode="gpu"')
        if side == "host_jpeg_gpu_share":
            sets.append(f"data.decode_cpu_share={a.cpu_share}")
        if a.device != "cuda":
            sets.append(f'run.device="{a.device}"')
        if a.precision != "bf16":
            sets.append(f'amp.precision="{a.precision}"')
        return sets

    TRACED_STEPS = 3
    # nvJPEG's and the device pass's kernels: what decoding costs the GPU beside the step.
    DECODE_KERNELS = re.compile(r"nvjpeg|jpeg|resize_normalise|huffman|idct|yuv|color_?conv", re.I)

    def trace_steps(self, side, r):
        """[first, last] for run.trace_steps with --trace: the run's last steps (1-based, global),
        in the first round, on the GPU-decode sides and the pool (what decoding adds to a step)."""
        if not (self.a.trace and r == 0 and side in (*GPU_DECODE, "host_pool")):
            return None
        total = self.a.epochs * self.steps_per_epoch()
        return [total - self.TRACED_STEPS + 1, total] if total > 3 * self.a.window else None

    def parse_trace(self, run_dir, trace, rec):
        """The device time of the traced steps: per category, and nvJPEG's and the device pass's."""
        path = run_dir / "trace" / "rank0.json"
        try:
            names, _ = kernel_breakdown.aggregate_trace(path)
        except (OSError, ValueError) as e:
            rec["trace_error"] = f"{path.name}: {e}"
            return
        steps = trace[1] - trace[0] + 1
        b = kernel_breakdown.breakdown(names, steps, top=8)
        decode_us = sum(us for name, (us, _) in names.items() if self.DECODE_KERNELS.search(name))
        top = sorted(names.items(), key=lambda kv: -kv[1][0])[:12]
        rec["trace"] = {"steps": trace, "kernel_ms_per_step": round(b["kernel_ms"], 2),
                        "decode_ms_per_step": round(decode_us / 1000 / steps, 2),
                        "categories_ms": {k: round(v, 2) for k, v in b["categories"].items()},
                        "copy_ms_per_step": round(b["copy_ms"], 2),
                        "top_kernels_ms": [[n[:90], round(us / 1000 / steps, 3)] for n, (us, _) in top]}

    def command(self, model, side, run_dir, run):
        a = self.a
        if side in HOST_SIDES:
            toml = HERE / ("gpu_resnet50.toml" if side == "host_pool" else "gpu_e2e_resnet.toml")
            cmd = [str(a.build / "bin/host"), "--config", str(toml), "--output-dir", str(run_dir)]
            if side == "host_pool":
                cmd += ["--plugin-dir", str(a.build / "bench/plugins")]
            sets = self.host_sets(model, side)
            if trace := self.trace_steps(side, run):
                sets.append(f"run.trace_steps=[{trace[0]},{trace[1]}]")
            return cmd + [x for s in sets for x in ("--set", s)]
        if side in ("python_tv", "python_nvjpeg"):
            return [a.python, str(HERE / "gpu_e2e_sides.py"), "train", "--side", side.removeprefix("python_"),
                    "--root", self.data["root"], "--model", model, "--classes", str(self.data["classes"]),
                    "--batch", str(a.batch), "--size", str(a.size), "--workers", str(a.workers), "--reader-workers",
                    str(a.reader_workers), "--epochs", str(a.epochs), "--window", str(a.window), "--device", a.device,
                    "--precision", a.precision]
        if side == "rate_gpu":
            return [str(a.build / "bin/gpu_decode_bench"), self.data["root"], "--batch", str(a.batch), "--threads",
                    str(a.loader_threads), "--rounds", "2"]
        if side == "rate_host":
            return [str(a.build / "bin/image_pipeline_bench"), "--root", self.data["root"], "--workers", "1",
                    "--batch", "64", "--size", str(a.size), "--epochs", "2",
                    "--set", f'data.train.csv="{self.tmp / "rate_subset.csv"}"']
        return [a.python, str(HERE / "gpu_e2e_sides.py"), "decode", "--root", self.data["root"], "--subset",
                str(a.rate_images), "--size", str(a.size), "--device", a.device]

    def rate_subset(self):
        """rate_host's images: --rate-images files spread over the listing (gpu_e2e_sides.py's
        spread(), the same files), as image_folder's csv (paths relative to ROOT)."""
        n = min(self.a.rate_images, len(self.files))
        rows = [self.files[(k * len(self.files)) // n] for k in range(n)]
        (self.tmp / "rate_subset.csv").write_text("path,label\n" + "".join(f"{p},{label}\n" for p, label in rows))

    def missing(self, side):
        a = self.a
        side = CPU_OF.get(side, side)
        need = {"host_jpeg": ["bin/host", "plugins/resnet.so", "plugins/basic_losses.so", "plugins/image_folder.so"],
                "host_shards": ["bin/host", "plugins/resnet.so", "plugins/basic_losses.so", "plugins/webdataset.so"],
                "host_pool": ["bin/host", "plugins/resnet.so", "plugins/basic_losses.so",
                              "bench/plugins/bench_tensor_pool.so"],
                "rate_gpu": ["bin/gpu_decode_bench"],
                "rate_host": ["bin/image_pipeline_bench", "plugins/image_folder.so", "plugins/vision_models.so",
                              "plugins/basic_losses.so"]}.get(side, [])
        return [p for p in need if not (a.build / p).exists()]

    # ---- the plan ----
    def priority(self, model, r, side):
        """0: round 1 of host_jpeg_gpu, host_jpeg, host_pool, host_shards_gpu and python_tv (every
        model, in --models order); 1: the decode rates; 2: host_shards' round 1; 3: python_nvjpeg's
        round 1; then each later round in the same order (4, 5, 6 for round 2, ...)."""
        if side in RATES:
            return 1
        group = 0 if side in MAIN else 1 if side == "host_shards" else 2
        if r == 0:
            return (0, 2, 3)[group]
        return 4 + 3 * (r - 1) + group

    @staticmethod
    def round_order(sides, r):
        """SIDES' order, reversed every other round; python_tv after the GPU-decode sides in every
        round (they are what the next GPU run is for)."""
        order = list(sides) if r % 2 == 0 else list(sides[::-1])
        gpu = [i for i, s in enumerate(order) if s in GPU_DECODE]
        if "python_tv" in order and gpu and order.index("python_tv") < gpu[-1]:
            order.remove("python_tv")
            order.insert(gpu[-1], "python_tv")  # gpu[-1] shifted down by one: right after the last
        return order

    def plan(self):
        out = []
        for r in range(self.a.runs):
            for model in self.a.models:
                sides = [s for s in SIDES if s in self.a.sides]
                for side in self.round_order(sides, r):
                    out.append((model, r, side, self.priority(model, r, side)))
        for side in RATES:
            if side.removeprefix("rate_") in self.a.rates:
                out.append(("decode", 0, side, self.priority("decode", 0, side)))
        return sorted(out, key=lambda x: x[3])

    def estimate(self, model, r, side):
        """Seconds (every round costs the same: r is the plan's, unused)."""
        a = self.a
        if side == "rate_host":
            return 1.0 + 3 * a.rate_images / RATE_PER_THREAD["host"]
        if side == "rate_python":
            return STARTUP_S["python"] + a.rate_images / RATE_PER_THREAD["python"] + 4.0
        if side == "rate_gpu":  # three modes, a warm-up and two rounds each; the CUDA decoder the slowest
            return 5.0 + 3 * self.data["count"] * 3 / GPU_DECODE_RATE * 2
        m = MODELS[model]
        scale = a.batch / 256 * (a.size / 224) ** 2
        gpu_s = m["step_ms"] * scale / 1000
        kind = "host" if side in HOST_SIDES else "python"
        if side == "host_pool":
            step_s = gpu_s
        elif side in GPU_DECODE:  # host_jpeg's cost without the CPU loader's limit
            step_s = max(gpu_s, a.batch / GPU_DECODE_RATE)
        elif side == "python_nvjpeg":
            step_s = gpu_s + NVJPEG_MS * a.batch / 256 / 1000
        else:
            step_s = max(gpu_s, a.batch / (a.workers * RATE_PER_THREAD[kind]))
        seconds = STARTUP_S[kind] + m["warmup_s"] + a.epochs * (self.steps_per_epoch() * step_s + EPOCH_STALL_S)
        if side.startswith("python"):
            seconds += WORKERS_START_S
        if side in GPU_DECODE:
            seconds += GPU_DECODE_START_S
        return seconds

    @staticmethod
    def group(side):
        """The runs whose wall / estimate scale each other's estimates (the GPU-decode sides' own:
        their estimate is the least known)."""
        if side in GPU_DECODE:
            return "host_gpu_decode"
        return "host" if side in HOST_SIDES else side if side in RATES else "python"

    def absent(self, side):
        """What this machine lacks for the side (the data set, the build, the shards), or None."""
        a, d = self.a, self.data
        if d.get("missing"):
            return f"not run: no data set at {d['root']} (bench/image_pipeline/make_imagenet_like.py, or --prepare)"
        if missing := self.missing(side):
            shards = CPU_OF.get(side, side) == "host_shards"
            what = "not built" if shards and "plugins/webdataset.so" in missing else "not run"
            return f"{what}: missing in {a.build}: {', '.join(missing)}"
        if CPU_OF.get(side, side) == "host_shards" and not d.get("shards_pattern"):
            return f"not run: no shards in {d['shards_dir']}"
        return None

    def decide(self, model, r, side, elapsed, here=True):
        """None to run it, else why not. here=False: as if the data set, its shards and the build
        were there (the dry run's plan for the GPU machine)."""
        a, d = self.a, self.data
        if side == "rate_gpu" and a.device != "cuda":
            return f"not run: nvJPEG needs CUDA (--device {a.device})"
        if side in GPU_DECODE and a.device != "cuda":
            return f'not run: data.decode = "gpu" needs CUDA (--device {a.device}: the host would exit 2)'
        if here and (why := self.absent(side)):
            return why
        if side not in RATES and self.steps_per_epoch() < a.window:
            return f"not run: {d['count']} images give {self.steps_per_epoch()} steps of {a.batch} per epoch, " \
                   f"fewer than a window of {a.window}"
        for x in self.results.get(model, {}).get(side, []):
            if "error" in x and not skipped(x):
                return f"not run: run {x['run']} of this side failed (below)"
        return self.over_budget(model, r, side, elapsed)

    # ---- running ----
    def run(self, model, r, side, rec):
        """One run, its own process (its own session, ended with its children), its CPU time
        sampled from /proc while it runs."""
        run_dir = self.tmp / f"{model}-{side}-{r + 1}"
        if side == "rate_host":
            self.rate_subset()
        cmd = self.command(model, side, run_dir, r)
        rec["cmd"] = shlex.join(cmd)
        history = run_dir / "history.jsonl"
        out_path = self.tmp / f"{run_dir.name}.log"

        def marks():
            """Windows logged so far: history.jsonl's step rows, or the Python side's window lines."""
            path = history if side in HOST_SIDES else out_path
            key = b'"time/step_s"' if side in HOST_SIDES else b"window {"
            try:
                data = path.read_bytes()
            except OSError:
                return 0
            return sum(1 for line in data.split(b"\n")[:-1] if key in line)

        timeout = min(self.a.timeout_s, self.left())
        samples = []  # (seconds since start, CPU seconds of the tree, windows logged)
        with open(out_path, "w+") as out:
            start = time.monotonic()
            # leftovers: the session is killed even after a clean exit, for a DataLoader worker left behind
            with self.session(cmd, out, {**os.environ, "PYTHONUNBUFFERED": "1"}, leftovers=True) as child:
                tree = ProcessTree(child.pid)
                while True:
                    rc = child.poll()
                    now = time.monotonic() - start
                    samples.append((now, tree.sample(), marks()))
                    if rc is not None or now > timeout:
                        break
                    time.sleep(POLL_S)
            wall = time.monotonic() - start
            out.seek(0)
            text = out.read()
        # A run that finished its work (the host's "finished" line, a side's result line) and then
        # failed or hung on the way out keeps its figures, with a note.
        if side in GPU_DECODE:  # what the host chose and counted, also for a run that failed
            self.parse_decode(run_dir, rec)
        finished = ("] info: finished " in text) if side in HOST_SIDES else \
            bool(re.search(r"^(host images_per_s=|result \{)", text, re.M)) or \
            (side == "rate_python" and "partial {" in text)
        try:
            if rc is None and not finished:
                raise RuntimeError(f"timed out after {timeout:.0f} s")
            if rc != 0 and not finished:
                raise RuntimeError(f"exit status {rc}")
            if rc != 0:
                rec["exit_note"] = (f"timed out after {timeout:.0f} s" if rc is None else f"exit status {rc}") + \
                    " after its figures"
            if side in HOST_SIDES:
                trace = self.trace_steps(side, r)
                windows = self.parse_host(run_dir, side, rec, trace)
                if trace:
                    self.parse_trace(run_dir, trace, rec)
            elif side in ("python_tv", "python_nvjpeg"):
                windows = self.parse_python(text, rec)
            elif side == "rate_gpu":
                modes = [json.loads(line) for line in text.splitlines() if line.startswith('{"mode"')]
                if not modes:
                    raise RuntimeError("no decode-rate line")
                rec.update(modes={m["mode"]: m for m in modes})
                windows = None
            elif side == "rate_host":
                m = re.search(r"^host images_per_s=([0-9.]+) epochs=(\d+)", text, re.M)
                if not m:
                    raise RuntimeError("no 'host images_per_s=' line")
                rec.update(images_per_s=float(m.group(1)), epochs=int(m.group(2)), images=self.a.rate_images)
                windows = None
            else:
                try:
                    got = self.last_json(text, "result")
                except RuntimeError:  # the CPU rate came out before the GPU's failed or hung
                    got = self.last_json(text, "partial")
                    rec["exit_note"] = rec.get("exit_note", "") + " (the GPU rates did not finish)"
                rec.update(got)
                self.info.setdefault("torch", got.get("torch"))
                self.info.setdefault("torchvision", got.get("torchvision"))
                windows = None
        except Exception as e:  # noqa: BLE001
            raise RuntimeError(f"{e}\n{tail(text)}") from None
        total_cpu = samples[-1][1] if samples else 0.0
        rec["cores_run"] = round(total_cpu / wall, 2) if wall > 0 else None
        if windows is not None:
            self.steady_cores(samples, windows, rec)

    def steady_cores(self, samples, windows, rec):
        """CPU cores busy over the timed windows: from the first sample that had seen the last
        untimed window to the first that had seen the last window (~POLL_S resolution)."""
        n0, n = windows
        t_a = next(((t, c) for t, c, k in samples if k >= n0), None) if n0 > 0 else (samples[0][0], samples[0][1])
        t_b = next(((t, c) for t, c, k in samples if k >= n), None)
        if t_a and t_b and t_b[0] - t_a[0] > 0.5:
            rec["cores_timed"] = round((t_b[1] - t_a[1]) / (t_b[0] - t_a[0]), 2)
            rec["timed_span_s"] = round(t_b[0] - t_a[0], 2)

    def timed(self, windows):
        """The timed windows: the second epoch's on (all but the first window with one epoch)."""
        if self.a.epochs >= 2:
            return [w for w in windows if w["epoch"] >= 1]
        return windows[1:]

    def figures(self, windows, rec):
        timed = self.timed(windows)
        if not timed:
            raise RuntimeError(f"no timed window ({len(windows)} windows in all)")
        step_s = statistics.median(w["step_s"] for w in timed)
        rec.update(images_per_s=self.a.batch / step_s, windows=len(timed),
                   window_ms=[round(1000 * w["step_s"], 2) for w in timed],
                   data_wait=statistics.median(w["wait_s"] / w["step_s"] for w in timed))
        return len(windows) - len(timed), len(windows)

    def parse_host(self, run_dir, side, rec, trace=None):
        rows = [json.loads(line) for line in open(run_dir / "history.jsonl") if line.strip()]
        windows = [{"epoch": int(row.get("epoch", 0)), "step": int(row.get("step", 0)), "step_s": row["time/step_s"],
                    "wait_s": row.get("time/data_wait_s", 0.0)} for row in rows if "time/step_s" in row]
        if trace:  # the window holding the traced steps ran under the profiler
            windows = [w for w in windows if w["step"] < trace[0]]
        peaks = [row["memory/peak_mb"] for row in rows if "memory/peak_mb" in row]
        if peaks and self.a.device == "cuda":  # on the CPU it is the process's peak RSS
            rec["peak_alloc_mib"] = round(max(peaks) * 1e6 / 2**20)
        rec["loader_threads"] = self.threads(side)
        if (run_dir / "runtime.toml").exists():
            runtime = (run_dir / "runtime.toml").read_text()
            if m := re.search(r"""^libtorch = ["']([^"']+)["']""", runtime, re.M):
                self.info["host_libtorch"] = m.group(1)
            if m := re.search(r"^threads = (\d+)", runtime, re.M):
                rec["intra_op_threads"] = int(m.group(1))
        return self.figures(windows, rec)

    DECODE_COUNTS = re.compile(r'data\.decode = "gpu": (\d+) images decoded on the JPEG engines \((\d+) of them as '
                               r"the region around their crop\), (\d+) by nvJPEG's CUDA decoder, (\d+) on the CPU "
                               r"\(.*?\), (\d+) failed there too, (\d+) decoded on the loader threads meanwhile "
                               r"\(data\.decode_cpu_share\); nvJPEG allocated (\d+) device buffers \(caching "
                               r"allocator\) and (\d+) pinned ones over (\d+) decoders")

    def parse_decode(self, run_dir, rec):
        """runtime.toml's [decode] train state ("gpu: ..." or "cpu: <why>") and train.log's last
        'data.decode = "gpu": N images decoded on the JPEG engines, ...' line, where present."""
        try:
            runtime = (run_dir / "runtime.toml").read_text()
        except OSError:
            runtime = ""
        table = re.search(r"^\[decode\][ \t]*\n(.*?)(?=^\[|\Z)", runtime, re.M | re.S)
        if table:
            for key in ("mode", "train"):
                if m := re.search(rf'^{key} = "((?:[^"\\]|\\.)*)"', table.group(1), re.M):
                    rec["decode_" + key] = re.sub(r"\\(.)", r"\1", m.group(1))
        try:
            log_text = (run_dir / "train.log").read_text(errors="replace")
        except OSError:
            log_text = ""
        counts = self.DECODE_COUNTS.findall(log_text)
        if counts:
            rec["decode_counts"] = dict(zip(("engines", "regions", "cuda", "cpu", "failed", "shared", "device_buffers",
                                             "pinned_buffers", "decoders"), map(int, counts[-1])))
        elif 'data.decode = "gpu": ' in log_text:  # a wording this parser does not know: keep the line
            line = [x for x in log_text.splitlines() if 'data.decode = "gpu": ' in x][-1]
            rec["decode_line"] = line[line.index('data.decode = "gpu": '):]

    @staticmethod
    def last_json(text, kind):
        lines = [line for line in text.splitlines() if line.startswith(kind + " {")]
        if not lines:
            raise RuntimeError(f"no '{kind}' line in the output")
        return json.loads(lines[-1][len(kind) + 1:])

    def parse_python(self, text, rec):
        info = self.last_json(text, "info")
        for key in ("torch", "torchvision", "gpu"):
            if info.get(key):
                self.info.setdefault(key if key != "gpu" else "device", info[key])
        rec.update(loader_threads=info.get("loader_workers"), startup_s=info.get("startup_s"),
                   params=info.get("params"))
        result = self.last_json(text, "result")
        if "peak_alloc_mib" in result:
            rec["peak_alloc_mib"] = result["peak_alloc_mib"]
        windows = [json.loads(line[len("window "):]) for line in text.splitlines() if line.startswith("window {")]
        return self.figures(windows, rec)

    def dry_run(self, plan):
        elapsed = 0.0
        runs = []  # what starts, in order
        d = self.data
        log(f"# data: {d['root']}: {d['count']} images, {d['classes']} classes" +
            (" (not there yet: --count/--classes assumed)" if d.get("missing") else "") +
            f"; {self.steps_per_epoch()} steps of {self.a.batch} per epoch; shards: "
            f"{d.get('shards_pattern') or 'none found'}")
        for model, r, side, prio in plan:
            est = self.estimate(model, r, side)
            why = self.decide(model, r, side, elapsed, here=False)  # the plan as if all were there
            absent = self.absent(side) if why is None else None
            why_show = absent + " (here; the plan assumes it runs)" if absent else None
            if why is None:
                elapsed += est
                runs.append(f"{model} {side}" if model == "decode" else f"{model} {side} #{r + 1}")
            if side == "rate_host":
                self.rate_subset()
            cmd = shlex.join(self.command(model, side, self.tmp / f"{model}-{side}-{r + 1}", r))
            log(self.plan_line(model, r, side, prio, est, why, elapsed, cmd,
                               f" [{why_show}]" if why_show and not why else ""))
        log(f"# runs, in order: {', '.join(runs) or 'none'}")
        log(self.estimated_line(elapsed))

    def outcome(self, side, rec):
        if side in RATES:
            return f"done ({rec['wall_s']} s)"
        return (f"{rec['images_per_s']:.1f} images/s, data wait {rec['data_wait']:.1%}, "
                f"cores {rec.get('cores_timed', '-')} ({rec['wall_s']} s)" +
                (f"; {self.decode_note(rec)}" if side in GPU_DECODE else ""))

    def probe(self):
        """Device name and driver (nvidia-smi; no CUDA in this process), /dev/shm (DataLoader
        workers hand batches over through it)."""
        a = self.a
        self.info.update(device=a.device, python=a.python)
        try:
            shm = shutil.disk_usage("/dev/shm")
            self.info["dev_shm_free_gib"] = round(shm.free / 2**30, 1)
        except OSError:
            pass
        if a.device == "cuda":
            self.info.update(gpu_name_and_driver())

    # ---- report ----
    def summary(self, model):
        got = {}
        for side, runs in self.results.get(model, {}).items():
            ok = [x for x in runs if "error" not in x]
            s = {"errors": [x for x in runs if "error" in x], "runs": len(ok)}
            if ok and side not in RATES:
                v = [x["images_per_s"] for x in ok]
                s.update(runs_images_per_s=v, images_per_s=statistics.median(v))
                for key in ("data_wait", "cores_timed", "cores_run", "wall_s"):
                    vals = [x[key] for x in ok if x.get(key) is not None]
                    if vals:
                        s[key] = statistics.median(vals)
                for key in ("loader_threads", "peak_alloc_mib", "params", "intra_op_threads"):
                    vals = [x[key] for x in ok if x.get(key) is not None]
                    if vals:
                        s[key] = max(vals)
            elif ok:
                s["result"] = ok[0]
            got[side] = s
        return got

    def write(self):
        a = self.a
        sums = {m: self.summary(m) for m in self.results}
        doc = {"date": utc_now(), "info": self.info, "data": self.data, "budget_s": a.budget_s,
               "elapsed_s": round(time.monotonic() - self.t0, 1),
               "settings": {k: getattr(a, k) for k in ("models", "sides", "runs", "batch", "size", "workers",
                                                       "loader_threads", "prefetch", "epochs", "window", "precision",
                                                       "rate_images")},
               "steps_per_epoch": self.steps_per_epoch(), "results": self.results, "summary": sums,
               "estimate_factors": {g: round(self.factor(g), 2) for g in self.ratios}}
        return self.write_report(doc, lambda: self.markdown(sums, doc))

    @staticmethod
    def ratio(s, x, y):
        u, v = s.get(x, {}).get("images_per_s"), s.get(y, {}).get("images_per_s")
        return f"{u / v:.3f}" if u and v else "-"

    def cell(self, s, side):
        x = s.get(side, {})
        if x.get("images_per_s"):
            return f"{x['images_per_s']:.0f}"
        if side not in self.a.sides:
            return "n/a"
        errors = x.get("errors", [])
        if any(not skipped(e) for e in errors):
            return "failed"
        if errors and errors[0]["error"].startswith("not built"):
            return "not built"
        return "skipped" if errors and errors[0]["error"].startswith("skipped") else "not run"

    @staticmethod
    def decode_note(rec):
        """One run's data.decode = "gpu" counts (train.log's last line), shortened."""
        c = rec.get("decode_counts")
        if c:
            return (f"{c['engines']} decoded on the JPEG engines ({c['regions']} as regions), {c['cuda']} by "
                    f"nvJPEG's CUDA decoder, {c['cpu']} on the CPU, {c['failed']} failed, {c['shared']} on the loader "
                    f"threads meanwhile (data.decode_cpu_share); nvJPEG's allocations: "
                    f"{c['device_buffers']} device, {c['pinned_buffers']} pinned over {c['decoders']} decoders")
        return rec.get("decode_line") or "no data.decode count in train.log"

    def gpu_decode_section(self, sums):
        """Per model and source, the GPU-decode side against the pool, torchvision and the CPU path,
        with the goals, and the cores each keeps busy."""
        a = self.a
        if not any(s in a.sides for s in GPU_DECODE):
            return []
        L = [f'## GPU decode (data.decode = "gpu", {a.loader_threads} loader threads; the CPU path {a.workers})', "",
             "| model | source | GPU decode | CPU decode | pool | torchvision | GPU decode / pool (goal >= 0.95) | "
             "GPU decode / torchvision (goal >= 1.5 on ResNet-18) | GPU decode / CPU decode | "
             f"GPU decode cores busy (goal <= {GPU_DECODE_CORES}) | CPU decode cores busy | data wait GPU / CPU decode |",
             "| --- " * 12 + "|"]

        def goal(text, ok):
            return text if ok is None else f"{text} ({'met' if ok else '**not met**'})"

        def cores(z):
            return f"{z['cores_timed']:.1f}" if z.get("cores_timed") is not None else "-"

        for model in a.models:
            s = sums.get(model, {})
            rate = {k: s.get(k, {}).get("images_per_s") for k in SIDES}
            for side in GPU_DECODE:
                if side not in a.sides:
                    continue
                cpu = CPU_OF[side]
                x, y = s.get(side, {}), s.get(cpu, {})
                g, pool, tv = rate[side], rate["host_pool"], rate["python_tv"]
                to_pool = goal(self.ratio(s, side, "host_pool"), round(g / pool, 3) >= 0.95 if g and pool else None)
                to_tv = goal(self.ratio(s, side, "python_tv"),
                             round(g / tv, 3) >= 1.5 if g and tv and model == "resnet18" else None)
                busy = goal(cores(x), round(x["cores_timed"], 1) <= GPU_DECODE_CORES if x.get("cores_timed") is not None
                            else None)
                wait = " / ".join(f"{z['data_wait']:.1%}" if z.get("data_wait") is not None else "-" for z in (x, y))
                source = {"host_jpeg_gpu": "JPEG folder", "host_shards_gpu": "shards",
                          "host_jpeg_gpu_share": f"JPEG folder, decode_cpu_share {a.cpu_share}"}[side]
                L.append(f"| {model} | {source} | {self.cell(s, side)} | "
                         f"{self.cell(s, cpu)} | {self.cell(s, 'host_pool')} | {self.cell(s, 'python_tv')} | "
                         f"{to_pool} | {to_tv} | {self.ratio(s, side, cpu)} | {busy} | {cores(y)} | {wait} |")
        return L + [""]

    def markdown(self, sums, doc):
        a, info, d = self.a, self.info, self.data
        sets = "ImageNet-like JPEGs (bench/image_pipeline/make_imagenet_like.py)"
        if d.get("mean_kb"):
            sets += (f": {d['count']} files, {d['classes']} classes, mean {d['mean_kb']} KB (median {d.get('median_kb')}), "
                     f"mean {d.get('mean_width', 0):.0f}x{d.get('mean_height', 0):.0f}, quality 90")
        else:
            sets += f": {d['count']} files, {d['classes']} classes"
        L = ["# GPU end-to-end training benchmark (bench/train_speed/gpu_e2e_bench.py)", "",
             f"- device: {info.get('device')}" + (f" (driver {info['driver']})" if info.get("driver") else "") +
             f"; {info['cores']} cores; /dev/shm free {info.get('dev_shm_free_gib', '?')} GiB",
             f"- Python sides: torch {info.get('torch', '?')}, torchvision {info.get('torchvision', '?')}; host: "
             f"{a.build} (LibTorch {info.get('host_libtorch', '?')})",
             f"- {doc['date']}, {doc['elapsed_s']} s (--budget-s {a.budget_s:g}); data: {sets}; "
             f"shards: {d.get('shard_files', 0)} tar files"
             + (f" ({d['shards_pattern']})" if d.get("shards_pattern") else ""),
             f"- every side: batch {a.batch} at {a.size}x{a.size}, {a.precision} autocast, channels-last, cuDNN "
             f"benchmark, SGD lr 0.1 momentum 0.9 fused, RandomResizedCrop({a.size}) + hflip(0.5) + normalise "
             f"({MEAN_STD}); {a.epochs} epochs of {self.steps_per_epoch()} steps (drop_last), windows of "
             f"{a.window} steps; images/s = batch / median window step time over the windows of the second epoch on "
             "(the first epoch warms up); the table's figure the median of the runs",
             f"- loader: host GPU decode {a.loader_threads} loader threads (`--loader-threads`, "
             "`data.decode = \"gpu\"`: the plugins hand over the JPEG bytes and the crop, nvJPEG decodes each "
             "batch, batched on the GPU's JPEG engines, and one CUDA kernel crops, resizes, flips and normalises, "
             "on the loader threads)" + ("" if a.device == "cuda" else f" (not run on {a.device})") +
             f"; host {a.workers} loader threads (`data.num_workers`, prefetch {a.prefetch}; image_folder's "
             "defaults: **fast_decode on**, i.e. JPEGs decoded at 1/2, 1/4 or 1/8 scale where the crop allows; "
             f"OpenCV); torchvision: {a.workers} DataLoader worker processes, PIL decodes every JPEG fully, "
             f"pin_memory, persistent workers, a copy stream one batch ahead; nvJPEG: {a.reader_workers} reader "
             "processes, decode_jpeg(device='cuda') batched, transforms per image on the GPU" +
             ("" if a.device == "cuda" else f" (here on {a.device}: decode_jpeg on the CPU, a smoke test of the code "
                                            "path only)"),
             "- data wait: the fraction of step time the training thread waited for its batch (host: "
             "time/data_wait_s / time/step_s); cores busy: user + system CPU seconds of the run's processes "
             "(from /proc) per second, over the timed windows (and over the whole run, start-up and autotuning "
             "included; a training thread waiting for the GPU spins, so it counts as busy); the goals of the GPU "
             f"decode: at least 0.95 of the memory pool's rate (1.5x torchvision's on ResNet-18) with at most "
             f"{GPU_DECODE_CORES} cores busy"]
        if info.get("dev_shm_free_gib") is not None and info["dev_shm_free_gib"] < 8:
            L.append(f"- **/dev/shm has {info['dev_shm_free_gib']} GiB free**: the torchvision side's workers hand "
                     f"batches over through it ({a.workers} workers x 2 batches of "
                     f"{a.batch * 3 * a.size ** 2 * 4 / 2**20:.0f} MiB)")
        L += self.stopped_lines()
        L += ["", "## Summary (images/s, medians)", "",
              "| model | host JPEG, GPU decode | host shards, GPU decode | host JPEG | host shards | host pool | "
              "torchvision | torchvision + nvJPEG | JPEG GPU decode / pool | JPEG GPU decode / torchvision | "
              "JPEG GPU / CPU decode | JPEG / pool | JPEG / torchvision | shards / JPEG | nvJPEG / torchvision | "
              "host JPEG GPU decode cores busy | host JPEG cores busy | torchvision cores busy | "
              "loader threads (GPU decode / CPU) |",
              "| --- " * 19 + "|"]
        for model in a.models:
            s = sums.get(model, {})
            cores = [f"{s.get(x, {}).get('cores_timed'):.1f}" if s.get(x, {}).get("cores_timed") else "-"
                     for x in ("host_jpeg_gpu", "host_jpeg", "python_tv")]
            L.append(f"| {model} | " + " | ".join(self.cell(s, x) for x in COLUMNS) + " | " +
                     " | ".join([self.ratio(s, "host_jpeg_gpu", "host_pool"), self.ratio(s, "host_jpeg_gpu", "python_tv"),
                                 self.ratio(s, "host_jpeg_gpu", "host_jpeg"),
                                 self.ratio(s, "host_jpeg", "host_pool"), self.ratio(s, "host_jpeg", "python_tv"),
                                 self.ratio(s, "host_shards", "host_jpeg"), self.ratio(s, "python_nvjpeg", "python_tv")])
                     + " | " + " | ".join(cores) + f" | {a.loader_threads} / {a.workers} |")
        L.append("")
        L += self.gpu_decode_section(sums)
        for model in a.models:
            L += self.model_section(model, sums.get(model, {}))
        L += self.rates_section(sums.get("decode", {}), sums)
        return "\n".join(L) + "\n"

    def model_section(self, model, s):
        L = [f"## {model}: batch {self.a.batch} x 3x{self.a.size}x{self.a.size}, {self.data['classes']} classes", "",
             "| side | images/s | runs | data wait | cores busy (timed) | cores busy (run) | loader threads | "
             "peak allocated MiB | notes |", "| --- " * 9 + "|"]
        for side in COLUMNS:
            if side not in self.a.sides:
                continue
            x = s.get(side, {})
            runs = ", ".join(f"{v:.0f}" for v in x.get("runs_images_per_s", [])) or "-"
            notes = {"host_jpeg_gpu": 'image_folder, data.decode = "gpu"',
                     "host_jpeg_gpu_share": f'image_folder, data.decode = "gpu", decode_cpu_share = {self.a.cpu_share}',
                     "host_shards_gpu": 'webdataset, data.decode = "gpu"',
                     "host_jpeg": "image_folder, fast_decode on (default)", "host_shards": "webdataset, fast_decode on",
                     "host_pool": "tensor_pool: no decoding (the GPU's rate with the host's loop)",
                     "python_tv": "ImageFolder + DataLoader, PIL full decode",
                     "python_nvjpeg": "decode_jpeg(device='cuda') batched"}[side]
            notes = [notes]
            if self.a.device != "cuda" and side == "python_nvjpeg":
                notes.append(f"decode_jpeg on {self.a.device} (smoke test)")
            if side in GPU_DECODE:
                runs_all = self.results.get(model, {}).get(side, [])
                notes += [f"train: {v}" for v in dict.fromkeys(r["decode_train"] for r in runs_all
                                                                 if r.get("decode_train"))]
                notes += [f"run {r['run']}: {self.decode_note(r)}" for r in runs_all
                          if r.get("decode_counts") or r.get("decode_line") or
                          ("error" not in r and "images_per_s" in r)]
            notes += sorted({r["exit_note"] for r in self.results.get(model, {}).get(side, []) if r.get("exit_note")})
            for r in self.results.get(model, {}).get(side, []):
                if t := r.get("trace"):
                    notes.append(f"run {r['run']} traced steps {t['steps'][0]}-{t['steps'][1]}: device time "
                                 f"{t['kernel_ms_per_step']} ms/step, of it decoding {t['decode_ms_per_step']} ms "
                                 f"(kernels in gpu-e2e.json)")
                elif r.get("trace_error"):
                    notes.append(f"run {r['run']} trace: {r['trace_error']}")
            reasons = {}
            for e in x.get("errors", []):
                if skipped(e):
                    reasons.setdefault(e["error"], []).append(str(e["run"]))
                else:
                    notes.append(f"**run {e['run']} failed** (below)")
            notes += [f"run {', '.join(r)} {why}" for why, r in reasons.items()]
            f = lambda k, fmt: format(x[k], fmt) if x.get(k) is not None else "-"  # noqa: E731
            L.append(f"| {LABELS[side]} | {self.cell(s, side)} | {runs} | {f('data_wait', '.1%')} | "
                     f"{f('cores_timed', '.1f')} | {f('cores_run', '.1f')} | "
                     f"{x.get('loader_threads', self.threads(side) if side in HOST_SIDES else '-')} | "
                     f"{f('peak_alloc_mib', '.0f')} | {'; '.join(notes).replace('|', '/')} |")
        L.append("")
        for side in COLUMNS:
            for e in s.get(side, {}).get("errors", []):
                if not skipped(e):
                    L += [f"{LABELS[side]}, run {e['run']}" + (f": `{e['cmd']}`" if "cmd" in e else ""), "", "```",
                          e["error"], "```", ""]
        return L

    def rates_section(self, s, sums):
        L = ["## Decode rates (nothing else running)", "", "| what | images/s | notes |", "| --- | --- | --- |"]

        def row(what, got, notes=""):
            if isinstance(got, dict) and got.get("images_per_s"):
                L.append(f"| {what} | {got['images_per_s']:.0f} | {notes} |")
            else:
                why = got.get("error", "not run") if isinstance(got, dict) else "not run"
                L.append(f"| {what} | - | {why.splitlines()[0] if why else 'not run'} |")

        pool = [sums.get(m, {}).get("host_pool", {}).get("images_per_s") for m in self.a.models]

        def per_thread(got, what):
            """What one thread's rate means: 4 of them, and how many the pool's rate needs."""
            rate = got.get("images_per_s") if isinstance(got, dict) else None
            if not rate:
                return ""
            need = [f"{m} {p / rate:.1f}" for m, p in zip(self.a.models, pool) if p]
            return (f"; 4 {what} would give {4 * rate:.0f} images/s" +
                    (f"; {what} the memory pool's rate needs: " + ", ".join(need) if need else ""))

        host = s.get("rate_host", {})
        got = host.get("result") or (host.get("errors") or [{}])[0]
        row("host, 1 loader thread (image_pipeline_bench --workers 1 --batch 64, image_folder, fast_decode on), "
            f"decode + crop + resize + flip + normalise", got,
            f"{self.a.rate_images} files" + per_thread(got, "threads"))
        py = s.get("rate_python", {})
        got = py.get("result") or (py.get("errors") or [{}])[0]
        if "error" in got and not py.get("result"):
            row("Python decode rates", got)
        else:
            cpu = got.get("cpu_pil_one_worker", {})
            row("torchvision, 1 DataLoader worker (PIL full decode + RandomResizedCrop + flip + ToTensor + Normalize)",
                cpu, f"{cpu.get('images', '?')} files timed, batch 64" + per_thread(cpu, "workers"))
            g = got.get("gpu_nvjpeg", {})
            for key, what in (("decode", "GPU decode_jpeg(device='cuda'), batches of 256, decode only"),
                              ("decode_transform", "GPU decode_jpeg + RandomResizedCrop/flip per image + stack + "
                                                   "normalise")):
                x = g.get(key) if "error" not in g else g
                note = (f"{x['images']} files; CPU {x['cpu_ms_per_image']:.2f} ms per image, "
                        f"{x['cores_busy']:.1f} cores busy") if isinstance(x, dict) and x.get("images_per_s") else ""
                row(what, x or {"error": "not run"}, note)
        gpu = s.get("rate_gpu", {})
        got = gpu.get("result") or (gpu.get("errors") or [{}])[0]
        modes = got.get("modes", {}) if isinstance(got, dict) else {}
        for key, what in (("engines_whole", "host nvJPEG, the JPEG engines, whole images"),
                          ("engines_regions", "host nvJPEG, the JPEG engines, regions around RandomResizedCrop boxes"),
                          ("cuda_decoder", "host nvJPEG, the CUDA decoder, image by image")):
            x = modes.get(key) or (got if "error" in got else {"error": "not run"})
            note = (f"decode only, {x['threads']} threads of batch {x['batch']}; engines {x['engines']} "
                    f"(regions {x['regions']}), CUDA decoder {x['cuda_decoder']}, failed {x['failed']}"
                    if x.get("images_per_s") else "")
            row(what, x, note)
        for side in RATES:
            note = s.get(side, {}).get("result", {}).get("exit_note")
            if note:
                L.append(f"\n{LABELS[side]}: {note.strip()}")
            for e in s.get(side, {}).get("errors", []):
                if not skipped(e):
                    L += ["", f"{LABELS[side]}" + (f": `{e['cmd']}`" if "cmd" in e else ""), "", "```", e["error"], "```"]
        return L + [""]


def prepare(a):
    """Generate the set (make_imagenet_like.py skips the work when ROOT holds it)."""
    cmd = [a.python, str(GENERATOR), str(a.data), "--count", str(a.count), "--classes", str(a.classes)]
    log(f"$ {shlex.join(cmd)}")
    return subprocess.run(cmd).returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, default=ROOT / "build", help="torchhost build (bin/host, plugins/)")
    p.add_argument("--out", type=Path, required=True, help="where gpu-e2e.md and gpu-e2e.json go")
    p.add_argument("--data", type=Path, required=True, help="the JPEG set's ROOT (ROOT-shards beside it)")
    p.add_argument("--models", default="resnet18,resnet50",
                   help=f"of {', '.join(MODELS)}, in the plan's order (resnet18 first: the loader-bound one)")
    p.add_argument("--sides", default=",".join(SIDES), help=f"of {', '.join(SIDES)} (all by default)")
    p.add_argument("--rates", default="host,python,gpu",
                   help="decode rates to measure: host, python, gpu (nvJPEG per backend) ('' none)")
    p.add_argument("--runs", type=int, default=2, help="rounds (the budget may drop later ones)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224, help="crop size (the pool's image size)")
    p.add_argument("--workers", type=int, default=max(1, len(os.sched_getaffinity(0)) - 2),
                   help="loader threads (host) and DataLoader worker processes (torchvision); default cores - 2")
    p.add_argument("--loader-threads", type=int, default=GPU_DECODE_CORES,
                   help="the GPU-decode sides' loader threads (data.num_workers; default 4: the goal is at most 4 "
                        "cores busy); the other sides' are --workers")
    p.add_argument("--prefetch", type=int, default=4, help="the host's data.prefetch")
    p.add_argument("--cpu-share", type=float, default=0.2,
                   help="host_jpeg_gpu_share: data.decode_cpu_share, the share of each batch decoded on the CPU path")
    p.add_argument("--reader-workers", type=int, default=4, help="python_nvjpeg: DataLoader processes reading the files")
    p.add_argument("--epochs", type=int, default=2, help="per run; the first is warm-up")
    p.add_argument("--window", type=int, default=5, help="steps per timing window (train.log_every_steps)")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--rate-images", type=int, default=RATE_IMAGES, help="files for the CPU decode rates")
    p.add_argument("--device", default="cuda")
    p.add_argument("--python", default=sys.executable, help="interpreter of the Python sides (torch, torchvision)")
    p.add_argument("--timeout-s", type=float, default=120, help="per run")
    p.add_argument("--budget-s", type=float, default=170,
                   help="whole benchmark: a run starts only if its estimate fits in what is left (0: no limit)")
    p.add_argument("--prepare", action="store_true", help="generate the set first (skipped when ROOT holds it)")
    p.add_argument("--count", type=int, default=8000, help="--prepare: images")
    p.add_argument("--classes", type=int, default=100, help="--prepare: classes")
    p.add_argument("--keep", action="store_true", help="keep the runs' directories and logs (printed)")
    p.add_argument("--trace", action="store_true",
                   help="trace the last 3 steps of the first GPU-decode and pool runs (run.trace_steps): their "
                        "device time per step, nvJPEG's and the device pass's kernels among it")
    p.add_argument("--dry-run", action="store_true", help="print the plan (commands, priorities, estimates) and exit")
    a = p.parse_args()
    a.build, a.out, a.data = a.build.resolve(), a.out.resolve(), a.data.resolve()
    a.models = [m for m in a.models.split(",") if m]
    a.sides = [s for s in a.sides.split(",") if s]
    a.rates = [r for r in a.rates.split(",") if r]
    unknown = [m for m in a.models if m not in MODELS] + [s for s in a.sides if s not in SIDES] + \
        [r for r in a.rates if r not in ("host", "python", "gpu")]
    if unknown:
        p.error(f"unknown model, side or rate: {', '.join(unknown)}")
    if a.epochs < 1 or a.window < 1 or a.batch < 1 or a.workers < 0 or a.loader_threads < 0:
        p.error("--epochs, --window and --batch must be >= 1, --workers and --loader-threads >= 0")
    if a.prepare and not a.dry_run and prepare(a) != 0:
        log("gpu_e2e_bench.py: generating the set failed; the sides will say what is missing")
    bench = Bench(a)
    if a.keep:
        log(f"runs in {bench.tmp}")
    return bench.main()


if __name__ == "__main__":
    sys.exit(main())
