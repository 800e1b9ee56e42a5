"""GPU training benchmark: images/s and peak memory of the host, eager and with whole-step CUDA
graphs, against Python eager, Python with the whole step captured by torch.cuda.graph, the same
loop under torch.compile (reduce-overhead and max-autotune) and Lightning, on five cases:
small_cnn (batch 64 x 3x32x32), mlp (batch 128 x 3x32x32 flattened), ResNet-18 (batch 64 x
3x64x64, 100 classes), ResNet-50 (batch 128 and 256 x 3x224x224); bf16 autocast, channels-last
(4-D), cuDNN benchmark, fused SGD momentum 0.9 lr 0.1, synthetic in-memory data copied to the
device on a copy stream one step ahead on every side; each case's kernel-time ceiling, and a
kernel-time breakdown by category (convolution, normalisation, ...) of ResNet-50 batch 256 on the
host (eager, graphed) and in Python (eager, compiled). bench/README.md, "GPU benchmark".

    python3 bench/train_speed/gpu_bench.py --build BUILD_DIR --out DIR [--cache-dir DIR] [--budget-s 230]
        [--models small_cnn,mlp,...] [--sides host,host_graphs,python,python_graphs,compiled,compiled_max,lightning]
        (opt-in side host_graphs_unfused: host graphed with model.fused_norm=false, the ResNet cases)
        [--runs 3] [--breakdown resnet50_b256] [--dry-run]
    python3 bench/train_speed/gpu_bench.py --prewarm --out DIR --cache-dir DIR --budget-s S
        (beside the build: compile the compiled sides cold into the caches; DIR/compile-prewarm.json)
    CPU smoke test (no GPU, no build; the compiled side compiles C++ kernels for the CPU):
    .venv-bench/bin/python bench/train_speed/gpu_bench.py --out /tmp/gb --device cpu --sides python,compiled \\
        --models small_cnn,mlp --steps 6 --window 2 --batch 4 --image-size 32

The host sides run one process per run (bin/host). The Python sides (python, python_graphs,
compiled, compiled_max) run in one long-lived worker per case (python_sides.py), which pays
Python's start-up once and keeps each side built between runs; Lightning runs one process per run
(lightning_loop.py). Round r runs host, host_graphs, then each Python side in the worker, then
Lightning; the order reverses every other round. A side's figure is the median of its runs, each
run 1 / median window step time, the first window left out. Each run has an estimated cost
(start-up, autotuning, steps, compilation cold or from the caches the prewarm filled; scaled by
what the runs of its kind so far took against their estimates), and runs go by priority
(Bench.priority); with a budget a run starts only if its estimate fits in what is left. Writes
DIR/gpu-bench.md (also printed) and DIR/gpu-bench.json after every run, so a timeout or a failing
side still leaves the results so far. A failing side is recorded and the others go on; a worker
that crashes is recorded against the side it was running and a fresh one starts for the rest.
Needs only this interpreter's standard library; the sides run in subprocesses (--python).
"""
import argparse
import json
import os
import queue
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kernel_breakdown  # noqa: E402 - standard library only
from bench_runs import ROOT, PlannedBench, Stop, gpu_name_and_driver, log, tail, utc_now  # noqa: E402 - likewise

SIDES = ("host", "host_graphs", "python", "python_graphs", "compiled", "compiled_max", "lightning")
# Opt-in (--sides, not the default): the host graphed with model.fused_norm = false, in the ResNet
# cases only, beside host_graphs (fused by default) so the fused BatchNorm + ReLU ops' gain shows
# (tp/cpp/fused_norm.h); in the case's table and the breakdown, not in the summary's columns.
EXTRA_SIDES = ("host_graphs_unfused",)
ALL_SIDES = SIDES + EXTRA_SIDES
LABELS = {"host": "host", "host_graphs": "host graphed", "host_graphs_unfused": "host graphed, unfused norm",
          "python": "python eager", "python_graphs": "python graphed",
          "compiled": "compiled reduce-overhead", "compiled_max": "compiled max-autotune", "lightning": "lightning"}
HOST_SIDES = ("host", "host_graphs", "host_graphs_unfused")
GRAPHED_HOST_SIDES = ("host_graphs", "host_graphs_unfused")
WORKER_SIDES = ("python", "python_graphs", "compiled", "compiled_max")  # python_sides.py
COMPILED = ("compiled", "compiled_max")
MODES = {"compiled": "reduce-overhead", "compiled_max": "max-autotune"}
KIND = {"host": "eager", "python": "eager", "lightning": "eager", "host_graphs": "graphed", "host_graphs_unfused": "graphed",
        "python_graphs": "graphed", "compiled": "compiled", "compiled_max": "compiled"}
BREAKDOWN_SIDES = ("host", "host_graphs", "host_graphs_unfused", "python", "compiled")  # those --sides selects
# Cases. steps = timed steps + one warm-up window (cuDNN autotuning, allocator warm-up, the host's
# graph capture). est: the plan's cost model, seconds on one H200 or H100 (bench/gpu/2026-11-27-h200.md
# where measured, else estimated): step_ms per kind of side (eager, graphed, compiled); warmup_s,
# cuDNN autotuning and first-use costs; compile_s per compiled side, (cold, from the caches) of
# its compile + 3 warm-up steps (measured: reduce-overhead small_cnn 14.3, mlp 4.3, ResNet-18 23.4,
# ResNet-50 b128 45.8 cold / 7.0 from the cache; the rest estimated); profile_steps, the steps
# profiled for the ceiling and the breakdown.
CASES = {
    # small_cnn's plugin checks the input size against its own image_size key.
    "small_cnn": dict(model="small_cnn", toml="gpu_small_cnn.toml", plugin="plugins/vision_models.so", classes=10,
                      batch=64, size=32, steps=520, window=20, channels_last=True, lightning=True,
                      host_sets=("model.image_size={size}",),
                      est=dict(step_ms=dict(eager=2.7, graphed=0.45, compiled=1.9), warmup_s=0.5,
                               compile_s=dict(compiled=(14, 5), compiled_max=(45, 10)), profile_steps=10)),
    "mlp": dict(model="mlp", toml="gpu_mlp.toml", plugin="plugins/vision_models.so", classes=10,
                batch=128, size=32, steps=520, window=20, channels_last=False, lightning=False,
                host_sets=("model.in_features={features}",),
                est=dict(step_ms=dict(eager=1.5, graphed=0.2, compiled=1.25), warmup_s=0.0,
                         compile_s=dict(compiled=(5, 2), compiled_max=(25, 5)), profile_steps=10)),
    "resnet18": dict(model="resnet18", toml="gpu_resnet18.toml", plugin="plugins/resnet.so", classes=100,
                     batch=64, size=64, steps=220, window=20, channels_last=True, lightning=False, host_sets=(),
                     est=dict(step_ms=dict(eager=8.0, graphed=1.9, compiled=3.5), warmup_s=2.0,
                              compile_s=dict(compiled=(24, 6), compiled_max=(120, 12)), profile_steps=5)),
    "resnet50": dict(model="resnet50", toml="gpu_resnet50.toml", plugin="plugins/resnet.so", classes=1000,
                     batch=128, size=224, steps=60, window=10, channels_last=True, lightning=True, host_sets=(),
                     est=dict(step_ms=dict(eager=31.0, graphed=29.0, compiled=21.5), warmup_s=6.0,
                              compile_s=dict(compiled=(46, 7), compiled_max=(300, 20)), profile_steps=3)),
    "resnet50_b256": dict(model="resnet50", toml="gpu_resnet50.toml", plugin="plugins/resnet.so", classes=1000,
                          batch=256, size=224, steps=40, window=8, channels_last=True, lightning=False, host_sets=(),
                          est=dict(step_ms=dict(eager=57.0, graphed=54.0, compiled=43.0), warmup_s=8.0,
                                   compile_s=dict(compiled=(50, 8), compiled_max=(320, 22)), profile_steps=3)),
}
SMALL = ("small_cnn", "mlp", "resnet18")
HEAVY = ("resnet50", "resnet50_b256")
# What the prewarm compiles, in the order of the benchmark's priorities: every reduce-overhead
# compile the benchmark runs first (priorities 0 and 1: the small cases, ResNet-50 b256's
# breakdown), then max-autotune (priority 3). A build-long prewarm (~90 s) covers the first four.
PREWARM = (("mlp", "compiled"), ("small_cnn", "compiled"), ("resnet18", "compiled"), ("resnet50_b256", "compiled"),
           ("mlp", "compiled_max"), ("small_cnn", "compiled_max"), ("resnet18", "compiled_max"))
PREWARM_FILE = "compile-prewarm.json"
# Process start-up to the first step (H200: small_cnn's host runs took 2.3-3.8 s for 0.2-1.4 s of
# steps; a Python process 8-10 s before its first step; Lightning 15-16.5 s for 1.4 s of steps).
STARTUP_S = {"host": 2.0, "host_graphs": 2.5, "host_graphs_unfused": 2.5, "lightning": 13.0}
WORKER_START_S = 9.0  # python_sides.py: import torch, CUDA context, the pinned pool
COMMAND_S = 0.4  # a worker command's own cost: building a side's model, syncs
CAPTURE_S = 1.0  # python_graphs' capture (its warm-up steps counted apart)
PROFILE_S = 3.0  # CUPTI's start, the profiled steps' overhead
TRACE_S = 3.0  # the host's profiler on the traced steps and writing the trace
COMPILE_WARMUP = 3  # untimed steps of a compiled side's build: compile, cudagraph trees' warm-up, recording
GRAPH_WARMUP = 3  # eager steps before python_graphs' capture (PyTorch's recipe uses 3)
HOST_MEMORY_KEY = "memory/peak_mb"  # training_report.cpp: peak bytes allocated by tensors / 1e6
GOAL_GRAPHS_VS_PYTHON = 3.0  # small_cnn and mlp
GOAL_GRAPHS_VS_COMPILED = 1.0  # every case
GOAL_GRAPHS_VS_PYTHON_GRAPHS = 1.0  # every case
GOAL_GRAPHS_VS_HOST = 1.0  # ResNet-50: graphed no slower than eager
# What Triton needs to build its launcher (triton/runtime/build.py): Python.h and a C compiler. Run
# with the sides' interpreter before the plan, so a machine without them skips the compiled sides
# at no cost instead of failing them once per case.
COMPILE_CHECK = r"""
import os, shutil, sysconfig
scheme = sysconfig.get_default_scheme()
scheme = "posix_prefix" if scheme == "posix_local" else scheme
header = os.path.join(sysconfig.get_paths(scheme=scheme)["include"], "Python.h")
missing = [] if os.path.exists(header) else [header + " (python3-dev)"]
if not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")):
    missing.append("a C compiler (gcc, clang or CC)")
print("; ".join(missing))
"""


class WorkerError(RuntimeError):
    """The worker died, timed out or reported itself unusable: it is ended and a fresh one
    starts for the next command. A RuntimeError: its message is the run's error as it is."""


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def skipped(rec):
    return rec.get("error", "").startswith(("skipped", "not run"))


class Worker:
    """One python_sides.py process: commands on its stdin, "@@ <json>" replies read by a thread
    (so a wait can time out), its stderr and other output in a log file."""

    def __init__(self, cmd, env, log_path):
        self.cmd, self.log_path = cmd, log_path
        self.log = open(log_path, "a")
        self.log.write(f"$ {shlex.join(cmd)}\n")
        self.log.flush()
        self.replies = queue.Queue()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1, start_new_session=True, env=env)
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = None

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                self.replies.put(line[3:])
                continue
            try:
                self.log.write(line)
                self.log.flush()
            except ValueError:  # closed: the worker is being ended
                pass
        self.replies.put(None)

    def wait(self, timeout):
        try:
            line = self.replies.get(timeout=max(timeout, 0.1))
        except queue.Empty:
            raise WorkerError(f"no answer within {timeout:.0f} s") from None
        if line is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
            raise WorkerError(f"the worker exited with status {self.proc.returncode}")
        return json.loads(line)

    def start(self, timeout):
        if self.ready is None:
            self.ready = self.wait(timeout)
        return self.ready

    def call(self, command, timeout):
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise WorkerError(f"the worker is gone ({e})") from None
        got = self.wait(timeout)
        if not got.get("ok") and not got.get("healthy", True):
            self.kill()
            raise WorkerError(f"{got.get('error')} (and the device failed the worker's health check after it)")
        return got

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.kill()
        self.log.close()

    def log_tail(self, n=20):
        self.log.flush()
        try:
            return tail(Path(self.log_path).read_text(errors="replace"), n)
        except OSError:
            return ""


class Bench(PlannedBench):
    REPORT, TITLE, SCRIPT = "gpu-bench", "GPU training benchmark", "gpu_bench.py"

    def __init__(self, a):
        super().__init__(a, "gpu_bench_")
        self.profiles = {}  # case -> side -> kernel_breakdown.breakdown(...) (+ trace notes)
        self.compile_blocker = ""  # why the compiled sides cannot run here
        self.workers = {}  # case -> Worker
        self.built = set()  # (case, side) built in the live worker of the case
        self.compiled_once = set()  # (case, side) compiled by this benchmark (a later compile reads the caches)
        self.start_failures = {}  # case -> worker start-ups that failed
        self.worker_log = []  # start-ups, crashes, closes
        self.deferred = {}  # case -> (run record, steps): python eager's profile, after the compiled side's
        self.prewarm = self.read_prewarm()

    # ---- cases and commands ----
    def shape(self, case):
        m = dict(CASES[case])
        a = self.a
        for key in ("steps", "window", "batch"):
            if getattr(a, key):
                m[key] = getattr(a, key)
        if a.image_size:
            m["size"] = a.image_size
        return m

    def sides(self, case):
        return [s for s in ALL_SIDES if s in self.a.sides and (s != "lightning" or CASES[case]["lightning"])
                and (s not in EXTRA_SIDES or CASES[case]["plugin"] == "plugins/resnet.so")]

    def trace_steps(self, case, r, side):
        """[first, last] for the host's run.trace_steps (the breakdown case's first host runs):
        the last profile_steps steps, inside the last window, which the timing leaves out."""
        if not (side in HOST_SIDES and r == 0 and case in self.a.breakdown and self.a.device == "cuda"):
            return None
        m = self.shape(case)
        if m["steps"] < 3 * m["window"]:
            return None  # the first and the traced window left out, nothing would remain
        n = min(CASES[case]["est"]["profile_steps"], m["window"])
        return [m["steps"] - n + 1, m["steps"]]

    def profile_steps(self, case, r, side):
        """Steps the worker profiles after the run: python eager's first run (the ceiling; every
        case), the compiled side's first run in a breakdown case. There python eager's profile
        waits until the compiled side has run and profiled (`deferred`): a profiler session, then
        a CUDA-graph capture (cudagraph trees' recording), then another session has been seen to
        leave the later session without kernel events (CUPTI, CUDA 13.0), so in one worker every
        capture comes before the first session."""
        if self.a.device != "cuda" or not self.a.profile or r != 0:
            return 0
        if side == "python" or (side == "compiled" and case in self.a.breakdown):
            return CASES[case]["est"]["profile_steps"]
        return 0

    def host_command(self, case, side, r, run_dir):
        m, a = self.shape(case), self.a
        sets = [f"train.batch_size={m['batch']}", f"train.log_every_steps={m['window']}",
                f"data.train.size={m['steps'] * m['batch']}", f"data.train.image_size={m['size']}",
                *[s.format(size=m["size"], features=3 * m["size"] ** 2) for s in m["host_sets"]]]
        if a.device != "cuda":
            sets.append(f'run.device="{a.device}"')
        if side in GRAPHED_HOST_SIDES:
            sets.append('run.cuda_graphs="on"')
        if side == "host_graphs_unfused":
            sets.append("model.fused_norm=false")
        if trace := self.trace_steps(case, r, side):
            sets.append(f"run.trace_steps=[{trace[0]},{trace[1]}]")
        return [str(a.build / "bin/host"), "--config", str(HERE / m["toml"]), "--output-dir", str(run_dir),
                "--plugin-dir", str(a.build / "bench/plugins"), *[x for s in sets for x in ("--set", s)]]

    def loop_args(self, case):
        m = self.shape(case)
        args = ["--model", m["model"], "--classes", str(m["classes"]), "--batch", str(m["batch"]),
                "--image-size", str(m["size"]), "--precision", "bf16", "--device", self.a.device,
                "--steps", str(m["steps"]), "--window", str(m["window"]), "--pool", "256", "--lr", "0.1",
                "--fused", "--cudnn-benchmark"]
        return args + (["--channels-last"] if m["channels_last"] else [])

    def worker_command(self, case):
        return [self.a.python, str(HERE / "python_sides.py"), *self.loop_args(case),
                "--compile-warmup", str(COMPILE_WARMUP), "--graph-warmup", str(GRAPH_WARMUP)]

    def lightning_command(self, case):
        return [self.a.python, str(HERE / "lightning_loop.py"), *self.loop_args(case)]

    def env(self):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # One cache for the prewarm and the benchmark: a compile the prewarm made cold is read
        # back here (Inductor's FX graph and autotuning caches, Triton's kernels).
        cache = self.a.cache_dir or Path(env.get("TORCHINDUCTOR_CACHE_DIR") or self.tmp / "inductor-cache")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
        env["TRITON_CACHE_DIR"] = str(Path(cache) / "triton")
        return env

    # ---- the prewarm's record ----
    def read_prewarm(self):
        path = self.a.prewarm_json
        if self.a.prewarm or not path or not path.exists():
            return {}
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as e:
            return {"error": f"{path}: {e}"}

    def prewarmed(self, case, side):
        """The prewarm's cold compile of this case and side, if it succeeded."""
        got = self.prewarm.get("compiles", {}).get(case, {}).get(side, {})
        return got if "compile_s" in got and "error" not in got else None

    # ---- the plan ----
    def priority(self, case, r, side):
        """0 first: round 1 of small_cnn, mlp and ResNet-18 (every side but compiled_max and
        Lightning); 1: the breakdown case's four runs (host and host graphed traced, python eager
        and compiled reduce-overhead profiled); 2: rounds 2 and 3 of the small cases; 3:
        compiled_max of the small cases, all rounds; 4: ResNet-50's round 1 of host, host
        graphed, python eager and python graphed; 5: Lightning and everything else."""
        if side == "lightning":
            return 5
        if case in self.a.breakdown:
            return 1 if r == 0 and side in BREAKDOWN_SIDES else 5
        if case in HEAVY:
            return 4 if r == 0 and side in ("host", "host_graphs", "host_graphs_unfused", "python", "python_graphs") else 5
        if side == "compiled_max":
            return 3
        return 0 if r == 0 else 2

    def plan(self):
        """(case, run index, side, priority) in the order they run: by priority, and within one
        priority round 1 of every case before round 2, each case's sides in order in even
        rounds and reversed in odd ones, so every side alternates with the others."""
        out = []
        for r in range(self.a.runs):
            for case in self.a.models:
                sides = self.sides(case)
                for side in sides if r % 2 == 0 else sides[::-1]:
                    out.append((case, r, side, self.priority(case, r, side)))
        return sorted(out, key=lambda x: x[3])  # stable: the order above within a priority

    def compile_estimate(self, case, side):
        cold, warm = CASES[case]["est"]["compile_s"][side]
        return warm if self.prewarmed(case, side) or (case, side) in self.compiled_once else cold

    def estimate(self, case, r, side):
        """Seconds, from the state now: whether the case's worker runs and the side is built."""
        m, est = self.shape(case), CASES[case]["est"]
        scale = m["batch"] / CASES[case]["batch"] * (m["size"] / CASES[case]["size"]) ** 2
        step_ms = est["step_ms"][KIND[side]] * scale
        seconds = m["steps"] * step_ms / 1000
        if side in HOST_SIDES:
            seconds += STARTUP_S[side] + est["warmup_s"] + (TRACE_S if self.trace_steps(case, r, side) else 0)
        elif side == "lightning":
            seconds = STARTUP_S[side] + est["warmup_s"] + seconds * 1.2  # its per-step hooks
        else:
            seconds += COMMAND_S
            if case not in self.workers:
                seconds += WORKER_START_S
            if (case, side) not in self.built:
                if not any(c == case for c, _ in self.built):
                    seconds += est["warmup_s"]  # cuDNN autotuning: once per process and shape
                if side in COMPILED:
                    seconds += self.compile_estimate(case, side)
                if side == "python_graphs":
                    seconds += CAPTURE_S + GRAPH_WARMUP * est["step_ms"]["eager"] * scale / 1000
            if n := self.profile_steps(case, r, side):
                seconds += PROFILE_S + n * step_ms / 1000
        return seconds

    @staticmethod
    def group(side):
        return {"host_graphs": "host", "host_graphs_unfused": "host", "python_graphs": "python",
                "compiled_max": "compiled"}.get(side, side)

    def decide(self, case, r, side, elapsed):
        """None to run it, else why not: the device, the budget, an earlier failure."""
        if self.a.device != "cuda":
            if side == "python_graphs":
                return "not run: CUDA only (torch.cuda.graph)"
            if side == "compiled_max":
                return "not run: max-autotune runs on CUDA only here (on the CPU it would autotune for minutes)"
        if side in COMPILED and self.compile_blocker:
            return f"not run: torch.compile cannot build Triton kernels here, missing {self.compile_blocker}"
        if side in WORKER_SIDES and self.start_failures.get(case, 0) >= 2:
            return "not run: the Python worker of this case failed to start twice (below)"
        failed = lambda x: "error" in x and not skipped(x)  # noqa: E731
        if side in COMPILED and sum(failed(x) for runs in self.results.values() for x in runs.get(side, [])) >= 2:
            return f"not run: the {LABELS[side]} side failed twice already (errors below)"
        for x in self.results.get(case, {}).get(side, []):
            if failed(x):
                return f"not run: run {x['run']} of this side failed (below)"
        reason = self.over_budget(case, r, side, elapsed)
        if reason and side in COMPILED and (case, side) not in self.built:
            reason += (f"; its compile alone is estimated at ~{self.compile_estimate(case, side)} s "
                       f"(alone: --models {case} --sides python,{side} --budget-s 0)")
        return reason

    # ---- running ----
    def run(self, case, r, side, rec):
        """One run: in the case's worker (the Python sides) or a process of its own."""
        if side in WORKER_SIDES:
            self.run_worker(case, r, side, rec)
        else:
            self.run_process(case, r, side, rec)
        rec["images_per_s"] = rec["steps_per_s"] * self.shape(case)["batch"]

    def outcome(self, side, rec):
        return f"{rec['images_per_s']:.1f} images/s ({rec['wall_s']} s" + \
            (f"; compile {rec['compile_s']:.1f} s" if "compile_s" in rec else "") + ")"

    def run_process(self, case, r, side, rec):
        """A host or Lightning run: its own process, its own session (a timeout or SIGTERM ends
        it with its threads and children)."""
        run_dir = self.tmp / f"{case}-{side}-{r + 1}"
        cmd = self.host_command(case, side, r, run_dir) if side in HOST_SIDES else self.lightning_command(case)
        rec["cmd"] = shlex.join(cmd)
        if side in HOST_SIDES:
            missing = [p for p in ("bin/host", CASES[case]["plugin"], "plugins/basic_losses.so",
                                   "bench/plugins/bench_tensor_pool.so") if not (self.a.build / p).exists()]
            if missing:
                raise RuntimeError(f"not built in {self.a.build}: {', '.join(missing)}")
        timeout = min(self.a.timeout_s, self.left())
        with open(self.tmp / f"{run_dir.name}.log", "w+") as out:
            with self.session(cmd, out, self.env()) as child:
                try:
                    rc = child.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    rc = None
            out.seek(0)
            text = out.read()
        try:
            if rc is None:
                raise RuntimeError(f"timed out after {timeout:.0f} s")
            if rc != 0:
                raise RuntimeError(f"exit status {rc}")
            rec.update(self.parse_host(case, r, side, run_dir, text) if side in HOST_SIDES else self.parse_lightning(text))
        except Exception as e:  # noqa: BLE001
            raise RuntimeError(f"{e}\n{tail(text)}") from None

    def worker(self, case):
        """The case's live worker, started (and waited for) if there is none."""
        w = self.workers.get(case)
        if w is not None and w.alive():
            return w
        if w is not None:
            self.end_worker(case, "found dead")
        n = len([e for e in self.worker_log if e["case"] == case and e["event"].startswith("start")]) + 1
        w = Worker(self.worker_command(case), self.env(), self.tmp / f"worker-{case}-{n}.log")
        start = time.monotonic()
        try:
            ready = w.start(min(self.a.timeout_s, self.left()))
        except WorkerError as e:
            w.kill()
            self.start_failures[case] = self.start_failures.get(case, 0) + 1
            self.worker_log.append({"case": case, "event": "start failed", "error": str(e)})
            raise WorkerError(f"the worker did not start: {e}\n{w.log_tail()}") from None
        self.workers[case] = w
        self.info["torch"] = ready.get("torch") or self.info.get("torch")
        self.worker_log.append({"case": case, "event": "start", "wall_s": round(time.monotonic() - start, 1),
                                "startup_s": ready.get("startup_s")})
        return w

    def end_worker(self, case, why):
        w = self.workers.pop(case, None)
        self.built = {x for x in self.built if x[0] != case}
        if w is not None:
            if why == "done":
                w.close()
            else:
                w.kill()
            self.worker_log.append({"case": case, "event": f"end ({why})"})

    def run_worker(self, case, r, side, rec):
        started = case not in self.workers
        w = self.worker(case)
        rec["cmd"] = f"{shlex.join(w.cmd)} <<< 'run {side}'"
        if started:
            rec["worker_start_s"] = self.worker_log[-1]["wall_s"]
        first_use = (case, side) not in self.built
        budget = self.a.timeout_s * (2 if side in COMPILED and first_use else 1)
        try:
            got = w.call(f"run {side}", min(budget, self.left()))
        except WorkerError as e:
            rec["worker_log"] = w.log_tail()
            self.end_worker(case, "crashed" if not w.alive() else "killed")
            raise WorkerError(f"{e}\n{rec['worker_log']}") from None
        if not got.get("ok"):
            raise RuntimeError(f"{got.get('error')}\n{tail(got.get('traceback', ''), 12)}")
        self.built.add((case, side))
        if side in COMPILED and "compile_s" in got:
            rec["compile_cache"] = ("warm: the prewarm compiled it" if self.prewarmed(case, side) else
                                    "warm: built earlier in this run" if (case, side) in self.compiled_once else "cold")
            self.compiled_once.add((case, side))
        for key in ("steps_per_s", "windows", "window_ms", "params", "peak_alloc_mib", "resident_mib", "others_mib",
                    "reserved_mib", "build_s", "compile_s", "capture_s", "graphs", "graph_breaks", "cudagraph_skips",
                    "command_s"):
            if key in got:
                rec[key] = got[key]
        if n := self.profile_steps(case, r, side):
            if side == "python" and case in self.a.breakdown and "compiled" in self.sides(case):
                self.deferred[case] = (rec, n)
            else:
                self.profile(case, side, n, rec)

    def profile(self, case, side, n, rec):
        """`n` profiled steps of a side in the case's worker (started, and the side built, if
        need be); a failure goes into rec["profile_error"], the run's figure stands."""
        w = None
        try:
            w = self.worker(case)
            got = w.call(f"profile {side} {n}", min(self.a.timeout_s, self.left()))
            self.built.add((case, side))
            if got.get("ok"):
                self.store_profile(case, side, got["profile"]["names"], got["profile"]["steps"], "torch.profiler")
            else:
                rec["profile_error"] = got.get("error")
        except WorkerError as e:  # the worker is restarted for the next side
            rec["profile_error"] = str(e) + (f"\n{w.log_tail()}" if w is not None else "")
            self.end_worker(case, "crashed while profiling")

    def run_deferred(self, case):
        """python eager's profile in a breakdown case, once the compiled side's first run is done
        (run, failed or skipped)."""
        if case not in self.deferred:
            return
        rec, n = self.deferred.pop(case)
        if self.left() < PROFILE_S + 2:
            rec["profile_error"] = "skipped (budget): no time left for the profile"
            return
        log(f"[{time.monotonic() - self.t0:5.0f} s] {case}: python eager's profile ({n} steps, deferred) ...")
        self.profile(case, "python", n, rec)

    def store_profile(self, case, side, names, steps, source, launches=None):
        b = kernel_breakdown.breakdown(names, steps, self.shape(case)["batch"])
        b["source"] = source
        # Every kernel with its category, ms and launches per step, largest first (JSON only): the
        # detail behind the table, for fused-kernel work and for completing the patterns.
        b["kernels"] = sorted(([name, kernel_breakdown.classify(name), round(us / steps / 1000, 5), count / steps]
                               for name, (us, count) in names.items()), key=lambda k: -k[2])
        if launches is not None:
            b["graph_launches"] = launches
        if b["kernels_per_step"] == 0 or b["kernel_ms"] <= 0:
            b["error"] = ("the trace holds no kernel events" +
                          (f" ({launches} cudaGraphLaunch calls: the graph's kernels were not reported)" if launches else "")
                          if source != "torch.profiler" else "the profiler saw no CUDA kernels (CUPTI unavailable?)")
        self.profiles.setdefault(case, {})[side] = b

    def parse_host(self, case, r, side, run_dir, text):
        rows = [json.loads(line) for line in open(run_dir / "history.jsonl") if line.strip()]
        trace = self.trace_steps(case, r, side)
        steps = [row for row in rows if "time/step_s" in row][1:]
        if trace:  # the window holding the traced steps ran under the profiler
            steps = [row for row in steps if row.get("step", 0) < trace[0]]
        if not steps:
            raise RuntimeError("no step records after the first window in history.jsonl")
        rec = {"steps_per_s": 1 / statistics.median(row["time/step_s"] for row in steps), "windows": len(steps),
               "window_ms": [round(row["time/step_s"] * 1000, 4) for row in steps]}
        if any("time/data_wait_s" in row for row in steps):
            rec["data_wait"] = statistics.median(row.get("time/data_wait_s", 0) / row["time/step_s"] for row in steps)
        peaks = [row[HOST_MEMORY_KEY] for row in rows if HOST_MEMORY_KEY in row]
        if peaks:
            rec["peak_alloc_mib"] = max(peaks) * 1e6 / 2**20
        log_text = (run_dir / "train.log").read_text() if (run_dir / "train.log").exists() else text
        if m := re.search(r"model \S+: (\d+) parameters", log_text):
            rec["params"] = int(m.group(1))
        # What the host said about CUDA graphs (capture, replay, a fallback), for the table's notes.
        graph_lines = [re.sub(r"^\S+ \S+ \[host\] \w+: ", "", line.strip()) for line in log_text.splitlines()
                       if re.search(r"\[host\].*cuda[_ ]?graph", line, re.I)]  # log lines, not the config's echo
        if graph_lines:
            rec["graphs_log"] = graph_lines[:3]
        if (run_dir / "runtime.toml").exists():
            runtime = (run_dir / "runtime.toml").read_text()
            if m := re.search(r"""^libtorch = ["']([^"']+)["']""", runtime, re.M):
                self.info["host_libtorch"] = m.group(1)
            # docs/cuda_graphs.md: a [cuda_graphs] table with mode, graphed and state.
            if m := re.search(r"^\[cuda_graphs\]\n((?:(?!\[).*\n?)*)", runtime, re.M):
                table = dict(re.findall(r"^(\w+) = (.+)$", m.group(1), re.M))
                if table.get("graphed"):
                    rec["graphed"] = table["graphed"].strip() == "true"
                if table.get("state"):
                    rec["runtime_cuda_graphs"] = table["state"].strip().strip("\"'")
        if trace:
            rec["trace_steps"] = trace
            path = run_dir / "trace" / "rank0.json"
            if path.exists():
                try:
                    names, launches = kernel_breakdown.aggregate_trace(path)
                    self.store_profile(case, side, names, trace[1] - trace[0] + 1, "host trace", launches)
                    rec["trace_mib"] = round(path.stat().st_size / 2**20, 1)
                except (OSError, ValueError) as e:
                    rec["trace_error"] = f"{path}: {e}"
            else:
                said = [line.strip() for line in log_text.splitlines() if "trace" in line.lower()][-2:]
                rec["trace_error"] = f"no {path.relative_to(run_dir)} written" + (f": {' / '.join(said)}" if said else "")
        return rec

    def parse_lightning(self, text):
        m = re.search(r"^lightning steps_per_s=([0-9.]+)(.*)$", text, re.M)
        if not m:
            raise RuntimeError("no 'lightning steps_per_s=' line")
        rec = {"steps_per_s": float(m.group(1))}
        for key, text_value in re.findall(r"(\w+)=(\S+)", m.group(2)):
            if key in ("torch", "lightning"):
                self.info.setdefault(key, text_value)
            else:
                rec[key] = value(text_value)
        return rec

    def stop(self, signum, frame):
        for w in list(self.workers.values()):
            w.kill()
        super().stop(signum, frame)

    def dry_run(self, plan):
        """The commands, each run's priority and estimate, and what the budget would skip if every
        run took its estimate (the workers' state simulated)."""
        if self.prewarm:
            done = [f"{c} {s}" for c, x in self.prewarm.get("compiles", {}).items() for s in x if self.prewarmed(c, s)]
            log(f"# compile-prewarm.json: {self.a.prewarm_json} ({', '.join(done) or 'nothing compiled'})")
        elapsed = 0.0
        for case, r, side, prio in plan:
            if side in HOST_SIDES:
                cmd = shlex.join(self.host_command(case, side, r, self.tmp / f"{case}-{side}-{r + 1}"))
            elif side == "lightning":
                cmd = shlex.join(self.lightning_command(case))
            else:
                n = self.profile_steps(case, r, side)
                cmd = ("" if case in self.workers else f"(start) {shlex.join(self.worker_command(case))}\n") + \
                    f"worker {case} <<< 'run {side}'" + (f"; 'profile {side} {n}'" if n else "")
            est = self.estimate(case, r, side)
            why = self.decide(case, r, side, elapsed)
            if why is None:
                elapsed += est
                if side in WORKER_SIDES:
                    self.workers[case] = None  # simulated: started
                    self.built.add((case, side))
            log(self.plan_line(case, r, side, prio, est, why, elapsed, cmd))
        self.workers.clear()
        self.built.clear()
        log(self.estimated_line(elapsed))

    def after_run(self, plan, i):
        case, r, side, _ = plan[i]
        if side == "compiled" and r == 0:
            self.run_deferred(case)
        # A case's worker ends when nothing later in the plan needs it (its GPU memory back).
        if case in self.workers and not any(c == case and s in WORKER_SIDES for c, _, s, _ in plan[i + 1:]):
            self.end_worker(case, "done")

    def end_runs(self):
        for case in list(self.workers):
            self.end_worker(case, "done")

    def probe(self):
        """Device name and versions, without initialising CUDA in this process; whether the sides'
        interpreter can build Triton kernels (the compiled sides)."""
        self.info.update(torch=version("torch"), lightning=version("lightning") or version("pytorch_lightning"),
                         device=self.a.device)
        if any(s in self.a.sides for s in COMPILED) and self.a.device == "cuda":
            try:
                out = subprocess.run([self.a.python, "-c", COMPILE_CHECK], capture_output=True, text=True, timeout=30)
                self.compile_blocker = out.stdout.strip() if out.returncode == 0 else f"(check failed: {tail(out.stderr, 1)})"
            except (OSError, subprocess.TimeoutExpired) as e:
                self.compile_blocker = f"(check failed: {e})"
            if self.compile_blocker:
                self.info["compile_blocker"] = self.compile_blocker
        if self.a.device == "cuda":
            self.info.update(gpu_name_and_driver())

    # ---- report ----
    def summary(self, case):
        got = {}
        for side, runs in self.results.get(case, {}).items():
            ok = [x for x in runs if "error" not in x]
            s = {"runs_images_per_s": [x["images_per_s"] for x in ok], "errors": [x for x in runs if "error" in x]}
            if ok:
                v = s["runs_images_per_s"]
                s["images_per_s"] = statistics.median(v)
                s["min"], s["max"] = min(v), max(v)
                s["spread"] = (max(v) - min(v)) / s["images_per_s"] if len(v) > 1 else None
                for key in ("peak_alloc_mib", "reserved_mib", "data_wait", "params"):
                    values = [x[key] for x in ok if key in x]
                    if values:
                        s[key] = max(values)
                for key in ("compile_s", "capture_s", "graphs", "graph_breaks", "cudagraph_skips", "compile_cache"):
                    values = [x[key] for x in ok if key in x]
                    if values:
                        s[key] = values  # per build: the first, and after a worker restart
                for key in ("graphs_log", "runtime_cuda_graphs", "graphed"):
                    values = [x[key] for x in ok if key in x]
                    if values:
                        s[key] = values[0]
            got[side] = s
        return got

    def ceiling(self, case):
        """The kernel-time ceiling: batch / the python eager step's kernel time, or None."""
        prof = self.profiles.get(case, {}).get("python")
        if not prof or not prof.get("kernel_ms"):
            return None
        batch = self.shape(case)["batch"]
        return {**prof, "images_per_s": batch / (prof["kernel_ms"] / 1000),
                "with_copies_images_per_s": batch / ((prof["kernel_ms"] + prof["copy_ms"]) / 1000)}

    @staticmethod
    def ratio(s, a, b):
        x, y = s.get(a, {}).get("images_per_s"), s.get(b, {}).get("images_per_s")
        return x / y if x and y else None

    @staticmethod
    def best_compiled(s):
        """The compiled side with the higher median, or None."""
        got = [side for side in COMPILED if s.get(side, {}).get("images_per_s")]
        return max(got, key=lambda side: s[side]["images_per_s"]) if got else None

    def goals(self, sums):
        out = []

        def goal(case, side, target, text):
            if case not in self.a.models or side not in self.a.sides:
                return
            r = self.ratio(sums.get(case, {}), "host_graphs", side)
            why = None
            if r is None:
                errors = sums.get(case, {}).get(side, {}).get("errors", []) or \
                    sums.get(case, {}).get("host_graphs", {}).get("errors", [])
                why = errors[0]["error"].splitlines()[0] if errors else "not run"
            out.append({"case": case, "against": side, "goal": target, "ratio": r, "text": text,
                        "met": None if r is None else r >= target, "why": why})

        for case in ("small_cnn", "mlp"):
            goal(case, "python", GOAL_GRAPHS_VS_PYTHON, f"host graphed >= {GOAL_GRAPHS_VS_PYTHON:g}x Python eager")
        for case in self.a.models:
            goal(case, "python_graphs", GOAL_GRAPHS_VS_PYTHON_GRAPHS,
                 f"host graphed >= {GOAL_GRAPHS_VS_PYTHON_GRAPHS:g}x Python graphed (torch.cuda.graph, whole step)")
        for case in self.a.models:
            goal(case, "compiled", GOAL_GRAPHS_VS_COMPILED,
                 f"host graphed >= {GOAL_GRAPHS_VS_COMPILED:g}x torch.compile reduce-overhead")
        for case in HEAVY:
            goal(case, "host", GOAL_GRAPHS_VS_HOST, "host graphed no slower than host eager")
        return out

    def write(self):
        a = self.a
        sums = {case: self.summary(case) for case in self.results}
        goals = self.goals(sums)
        doc = {"date": utc_now(), "info": self.info, "runs_per_side": a.runs, "budget_s": a.budget_s,
               "elapsed_s": round(time.monotonic() - self.t0, 1),
               "shapes": {c: self.shape(c) for c in a.models}, "results": self.results, "summary": sums,
               "ceilings": {c: self.ceiling(c) for c in a.models if self.ceiling(c)},
               "breakdowns": self.profiles, "prewarm": self.prewarm, "workers": self.worker_log, "goals": goals,
               "estimate_factors": {g: round(self.factor(g), 2) for g in self.ratios}}
        return self.write_report(doc, lambda: self.markdown(sums, goals, doc))

    @staticmethod
    def fmt(x, digits=3):
        return f"{x:.{digits}f}" if x is not None else "-"

    def cell(self, case, s, side):
        x = s.get(side, {})
        if x.get("images_per_s"):
            return f"{x['images_per_s']:.0f}"
        if side not in self.sides(case):
            return "n/a"
        if any(not skipped(e) for e in x.get("errors", [])):
            return "failed"
        return "skipped" if x else "not run"

    def markdown(self, sums, goals, doc):
        a, info = self.a, self.info
        L = ["# GPU training benchmark (bench/train_speed/gpu_bench.py)", "",
             f"- device: {info.get('device')}" + (f" (driver {info['driver']})" if info.get("driver") else ""),
             f"- Python sides: torch {info.get('torch')}, lightning {info.get('lightning')}; "
             f"host: {a.build} (LibTorch {info.get('host_libtorch', '?')})",
             f"- {doc['date']}, {doc['elapsed_s']} s (--budget-s {a.budget_s:g}); up to {a.runs} runs per side in "
             "rounds (host, host graphed, the Python sides in one worker process per case, lightning; the order "
             "reversed every other round); images/s = batch / median window step time of a run (first window "
             "left out), the table's figure the median of the runs, spread = (max - min) / median",
             "- all sides: bf16 autocast, channels-last model and input (4-D models), cuDNN benchmark, SGD momentum "
             "0.9 lr 0.1 (no weight decay), **fused** on every side (LibTorch's on the host, `fused=True` in "
             "Python), synthetic in-memory pool of 256 samples in pinned memory, each batch copied to the device "
             "on a copy stream one step ahead (the host's data.device_prefetch; python_loop.Prefetcher)",
             "- host graphed: `--set run.cuda_graphs=\"on\"` (forward, loss, backward and fused optimizer step "
             "captured as one CUDA graph after eager warm-up steps; ResNet's BatchNorm + ReLU run in the host's fused "
             "kernels, model.fused_norm, and host graphed, unfused norm adds `--set model.fused_norm=false`); "
             "python graphed: the same whole step captured "
             f"with `torch.cuda.graph` after {GRAPH_WARMUP} warm-up steps on a side stream, each batch copied into "
             "the static input before `replay()`; compiled: `torch.compile` of forward + loss "
             "(`F.cross_entropy(model(x).float(), y)`), mode reduce-overhead or max-autotune, backward through the "
             f"compiled graph, the fused SGD step eager, {COMPILE_WARMUP} untimed steps first (compile + warm-up s)",
             "- peak allocated: the host's `memory/peak_mb` (since start-up); a Python side's peak during its "
             "command (its build included: compile, capture) less what the worker's other sides held then "
             "(the memory allocated when the command began, less this side's own resident bytes), the largest "
             "of its runs",
             "- kernel-time ceiling: python eager's first run profiles a few steps after its timed loop "
             "(torch.profiler, CUDA activity): the sum of its kernels' device time per step, memcpy/memset apart; "
             "ceiling = batch / kernel time"]
        if info.get("compile_blocker"):
            L.append(f"- **compiled sides not run**: torch.compile cannot build Triton kernels here, missing "
                     f"{info['compile_blocker']}")
        if self.prewarm.get("error"):
            L.append(f"- compile-prewarm.json unreadable: {self.prewarm['error']}")
        L += self.stopped_lines()
        L += ["", "## Summary (images/s, medians)", "",
              "| case | host | host graphed | python eager | python graphed | compiled reduce-overhead | compiled "
              "max-autotune | lightning | graphed / python eager | graphed / python graphed | graphed / best compiled "
              "| graphed / host | largest spread | kernel-time ceiling | graphed / ceiling |",
              "| --- " * 15 + "|"]
        for case in a.models:
            s, c = sums.get(case, {}), self.ceiling(case)
            cells = [self.cell(case, s, side) for side in SIDES]
            g = s.get("host_graphs", {}).get("images_per_s")
            best = self.best_compiled(s)
            vs_best = self.ratio(s, "host_graphs", best)
            cells += [self.fmt(self.ratio(s, "host_graphs", "python")), self.fmt(self.ratio(s, "host_graphs", "python_graphs")),
                      self.fmt(vs_best) + (f" ({'max-autotune' if best == 'compiled_max' else 'reduce-overhead'})"
                                           if vs_best else ""),
                      self.fmt(self.ratio(s, "host_graphs", "host"))]
            spreads = [(x["spread"], side) for side, x in s.items() if x.get("spread") is not None]
            cells.append(f"{max(spreads)[0]:.1%} ({LABELS[max(spreads)[1]]})" if spreads else "-")
            cells += [f"{c['images_per_s']:.0f}" if c else "-", self.fmt(g / c["images_per_s"] if g and c else None)]
            L.append(f"| {case} | " + " | ".join(cells) + " |")
        L.append("")
        L += self.compile_section(sums)
        for case in a.models:
            L += self.case_section(case, sums.get(case, {}))
        for case in a.breakdown:
            if case in a.models:
                L += self.breakdown_section(case, sums.get(case, {}))
        L += ["## Goals", ""]
        for g in goals:
            verdict = (f"{g['ratio']:.3f}: **{'met' if g['met'] else 'not met'}**" if g["met"] is not None
                       else f"n/a ({g['why']})")
            L.append(f"- {g['case']}: {g['text']}: {verdict}")
        return "\n".join(L) + "\n"

    def compile_section(self, sums):
        rows = []
        for case in self.a.models:
            for side in COMPILED:
                if side not in self.a.sides:
                    continue
                x = sums.get(case, {}).get(side, {})
                cold = self.prewarm.get("compiles", {}).get(case, {}).get(side, {})
                cold_text = f"{cold['compile_s']:.1f}" if "compile_s" in cold else \
                    ("failed" if "error" in cold else cold.get("skipped", "-").split(":")[0]) if cold else "-"
                here = ", ".join(f"{v:.1f}" for v in x.get("compile_s", [])) or "-"
                if x.get("compile_cache"):
                    here += f" ({'; '.join(sorted(set(x['compile_cache'])))})"
                counts = "/".join(str(max(x[k])) if k in x else "-" for k in ("graphs", "graph_breaks", "cudagraph_skips"))
                ips = f"{x['images_per_s']:.0f}" if x.get("images_per_s") else self.cell(case, sums.get(case, {}), side)
                rows.append(f"| {case} | {MODES[side]} | {cold_text} | {here} | {counts} | {ips} |")
        if not rows:
            return []
        note = ("cold: the prewarm (`--prewarm`, " + ("measured beside the C++ build, so slower than alone" if
                                                      self.prewarm.get("measured_beside_build") else "alone") +
                f", {self.prewarm.get('date', '?')})") if self.prewarm.get("compiles") else \
            "cold: no prewarm record (compile-prewarm.json); a compile here without the caches is cold"
        return ["## Compile times (compile + warm-up s)", "",
                f"{note}; this run: the worker's build of the side (compile + {COMPILE_WARMUP} steps), from the caches "
                "where the prewarm or an earlier build filled them. graphs / graph breaks / cudagraph skips: Dynamo's "
                "and Inductor's counters over the build.", "",
                "| case | mode | cold s | this run s | graphs / breaks / cudagraph skips | images/s |",
                "| --- | --- | --- | --- | --- | --- |", *rows, ""]

    def case_section(self, case, s):
        m, c = self.shape(case), self.ceiling(case)
        L = [f"## {case}: {m['model']}, batch {m['batch']} x 3x{m['size']}x{m['size']}, {m['classes']} classes, "
             f"{m['steps']} steps (windows of {m['window']}, {m['steps'] - m['window']} timed)", "",
             "| side | images/s | runs | min-max (spread) | host graphed / side | peak allocated MiB | notes |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
        graphed = s.get("host_graphs", {}).get("images_per_s")
        for side in self.sides(case):
            x = s.get(side, {})
            ips = x.get("images_per_s")
            runs = ", ".join(f"{v:.0f}" for v in x.get("runs_images_per_s", [])) or "-"
            span = f"{x['min']:.0f}-{x['max']:.0f} ({x['spread']:.1%})" if x.get("spread") is not None else "-"
            ratio = f"{graphed / ips:.3f}" if graphed and ips and side != "host_graphs" else "-"
            alloc = f"{x['peak_alloc_mib']:.0f}" if "peak_alloc_mib" in x else "-"
            notes = []
            if side in HOST_SIDES:
                notes.append("LibTorch's fused SGD")
                if "data_wait" in x:
                    notes.append(f"data wait {x['data_wait']:.1%}")
                if side in GRAPHED_HOST_SIDES:
                    if x.get("runtime_cuda_graphs"):
                        notes.append(f"runtime.toml [cuda_graphs] state: `{x['runtime_cuda_graphs']}`")
                    if x.get("graphed") is False:
                        notes.append("**not graphed** (runtime.toml graphed = false)")
                    if x.get("graphs_log"):
                        notes.append("log: " + " / ".join(f"`{line[:120]}`" for line in x["graphs_log"]))
                traced = [r for r in self.results.get(case, {}).get(side, []) if "trace_steps" in r]
                for r in traced:
                    notes.append(f"run {r['run']} traced steps {r['trace_steps'][0]}-{r['trace_steps'][1]} "
                                 f"(their window left out)" + (f": {r['trace_error']}" if "trace_error" in r else ""))
            elif side == "python":
                notes.append("torch.optim.SGD(fused=True)")
            elif side == "python_graphs":
                notes.append("torch.cuda.graph of the whole step")
                if "capture_s" in x:
                    notes.append("warm-up + capture s: " + ", ".join(f"{v:.2f}" for v in x["capture_s"]))
            elif side in COMPILED:
                notes.append(f"torch.compile {MODES[side]} of forward + loss, fused SGD eager")
                if "compile_s" in x:
                    notes.append("compile + warm-up s: " + ", ".join(f"{v:.1f}" for v in x["compile_s"]))
                for key in ("graphs", "graph_breaks", "cudagraph_skips"):
                    if key in x:
                        notes.append(f"{key.replace('_', ' ')} {max(x[key])}")
            else:
                notes.append("Trainer bf16-mixed, fused SGD")
            if "params" in x:
                notes.append(f"{x['params']:,} parameters")
            errors = x.get("errors", [])
            failed = [e for e in errors if not skipped(e)]
            if failed:
                notes.append(f"**{len(failed)} failed run(s)**, below")
            reasons = {}  # skipped or not run: each reason once, with its runs
            for e in errors:
                if e not in failed:
                    reasons.setdefault(e["error"], []).append(str(e["run"]))
            notes += [f"run {', '.join(runs)} {why}" for why, runs in reasons.items()]
            for r in self.results.get(case, {}).get(side, []):
                if "profile_error" in r:
                    notes.append(f"profile failed: {r['profile_error'].splitlines()[0]}")
            L.append(f"| {LABELS[side]} | {f'{ips:.1f}' if ips else 'failed' if failed else 'not run'} | {runs} | "
                     f"{span} | {ratio} | {alloc} | {'; '.join(notes)} |")
        params = {side: x["params"] for side, x in s.items() if "params" in x}
        if len(set(params.values())) > 1:
            L.append(f"\nWARNING: parameter counts differ between sides: {params}")
        reserved = [x["reserved_mib"] for side, x in s.items() if side in WORKER_SIDES and "reserved_mib" in x]
        if reserved:
            L.append(f"\nThe Python worker's process reserved up to {max(reserved):.0f} MiB (all its sides together; "
                     "the caching allocator's blocks and the graphs' private pools).")
        L.append("")
        if c:
            reach = [f"{LABELS[side]} {s[side]['images_per_s'] / c['images_per_s']:.0%}" for side in SIDES
                     if s.get(side, {}).get("images_per_s")]
            L += [f"Kernel-time ceiling: {c['kernel_ms']:.3f} ms of kernels per step ({c['kernels_per_step']:.0f} "
                  f"kernels; memcpy/memset {c['copy_ms']:.3f} ms more), over {c['steps']} profiled python eager "
                  f"steps: **{c['images_per_s']:.0f} images/s** ({c['with_copies_images_per_s']:.0f} with the copies). "
                  f"Reached: {', '.join(reach) or '-'}.", ""]
        else:
            why = [r["profile_error"] for r in self.results.get(case, {}).get("python", []) if "profile_error" in r]
            why += [self.profiles.get(case, {}).get("python", {}).get("error", "")]
            why = [w for w in why if w]
            L += ["Kernel-time ceiling: not measured (" + (why[0].splitlines()[0] if why else
                                                           "python eager's first run did not profile") + ").", ""]
        for side in self.sides(case):
            for e in s.get(side, {}).get("errors", []):
                if skipped(e):
                    continue
                cmd = f": `{e['cmd']}`" if "cmd" in e else ""
                L += [f"{LABELS[side]}, run {e['run']}{cmd}", "", "```", e["error"], "```", ""]
        return L

    def breakdown_section(self, case, s):
        got = self.profiles.get(case, {})
        m = self.shape(case)
        L = [f"## Kernel-time breakdown: {case} ({m['model']}, batch {m['batch']})", "",
             "Device time per step by kernel category (bench/train_speed/kernel_breakdown.py): the host's sides from "
             "their Chrome trace (`run.trace_steps`, the last steps of the run, whose window the timing leaves out), "
             "the Python sides from torch.profiler over a few steps after their timed loop. Shares are of the "
             "kernel time (copies apart: they run on the copy stream, beside the step). Layout: cuDNN's NCHW <-> "
             "NHWC conversions, apart from convolution. Ceiling = batch / kernel time.", ""]
        cols = [side for side in BREAKDOWN_SIDES if side in self.sides(case)]
        L += ["| category | " + " | ".join(LABELS[c] for c in cols) + " |", "| --- " * (len(cols) + 1) + "|"]

        def cell(side, f):
            b = got.get(side)
            if not b:
                return "not measured"
            if b.get("error"):
                return "no kernels"
            return f(b)

        for cat in kernel_breakdown.CATEGORIES:
            L.append(f"| {cat} | " + " | ".join(cell(side, lambda b: f"{b['categories'][cat]:.3f} ms "
                                                       f"({b['categories'][cat] / b['kernel_ms']:.1%})") for side in cols) + " |")
        L.append("| copies (copy stream) | " + " | ".join(cell(side, lambda b: f"{b['copy_ms']:.3f} ms") for side in cols) + " |")
        L.append("| **kernel ms / step** | " + " | ".join(cell(side, lambda b: f"**{b['kernel_ms']:.3f}**") for side in cols) + " |")
        L.append("| kernels / step | " + " | ".join(cell(side, lambda b: f"{b['kernels_per_step']:.0f}") for side in cols) + " |")
        L.append("| ceiling images/s | " + " | ".join(cell(side, lambda b: f"{b.get('images_per_s', 0):.0f}") for side in cols) + " |")
        L.append("| measured images/s | " + " | ".join(f"{s[side]['images_per_s']:.0f}" if s.get(side, {}).get("images_per_s")
                                                      else "-" for side in cols) + " |")
        L.append("| profiled steps | " + " | ".join(cell(side, lambda b: str(b["steps"])) for side in cols) + " |")
        L.append("")
        for side in cols:
            b = got.get(side)
            if b and b.get("error"):
                L.append(f"- {LABELS[side]}: {b['error']}")
            elif b and b["other_top"]:
                L.append(f"- {LABELS[side]}, largest \"other\" kernels: " +
                         "; ".join(f"`{name[:110]}` {ms:.3f} ms" for name, ms in b["other_top"]))
            elif not b:
                why = [r.get("trace_error") or r.get("profile_error") or r.get("error", "")
                       for r in self.results.get(case, {}).get(side, [])]
                why = [w for w in why if w]
                L.append(f"- {LABELS[side]}: not measured" + (f" ({why[0].splitlines()[0]})" if why else ""))
        return L + [""]


def prewarm(a) -> int:
    """Compile the compiled sides cold into --cache-dir, beside the C++ build: a worker per case
    builds (compiles + warm-up steps) the compiled sides in PREWARM's order, the next case's
    worker started while the compile before it runs, a compile starting only if its cold
    estimate fits in what is left of --budget-s, the worker killed at the deadline. Records every compile's seconds (or error, or why skipped) in compile-prewarm.json
    after each one; exits 0 whatever a compile did."""
    bench = Bench(a)
    path = a.prewarm_json
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"date": utc_now(), "measured_beside_build": not a.alone, "budget_s": a.budget_s,
           "cache_dir": str(a.cache_dir), "python": a.python, "compile_warmup_steps": COMPILE_WARMUP, "compiles": {}, "workers": []}
    todo = [(case, side) for case, side in PREWARM if case in a.models and side in a.sides]
    if a.device != "cuda":
        todo = [(c, s) for c, s in todo if s != "compiled_max"]  # autotuning on the CPU: minutes
    workers = {}
    current = []  # [case, side, start] of the compile in flight, for a stop

    def write():
        doc["elapsed_s"] = round(time.monotonic() - bench.t0, 1)
        path.write_text(json.dumps(doc, indent=1) + "\n")

    def start(case):  # started one case ahead: its Python start-up overlaps the compile before it
        if case not in workers:
            workers[case] = Worker(bench.worker_command(case), bench.env(), bench.tmp / f"prewarm-{case}.log")

    def stop(signum, frame):
        for w in workers.values():
            w.kill()
        raise Stop(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    write()
    try:
        for case, side in todo:
            entry = doc["compiles"].setdefault(case, {})
            left = bench.left()
            need = CASES[case]["est"]["compile_s"][side][0] + (WORKER_START_S if case not in workers else 0)
            if a.budget_s > 0 and need > left:
                entry[side] = {"skipped": f"skipped (budget): ~{need:.0f} s estimated, {max(left, 0):.0f} s left"}
                log(f"[prewarm {time.monotonic() - bench.t0:5.0f} s] {case} {side}: {entry[side]['skipped']}")
                write()
                continue
            start(case)
            later = [c for c, _ in todo[todo.index((case, side)) + 1:] if c != case]
            if later:
                start(later[0])
            w = workers[case]
            log(f"[prewarm {time.monotonic() - bench.t0:5.0f} s] {case} {side} ({MODES[side]}, ~{need:.0f} s) ...")
            t = time.monotonic()
            current[:] = [case, side, t]
            try:
                if w.ready is None:
                    ready = w.start(min(120, bench.left()))
                    doc["workers"].append({"case": case, "startup_s": ready.get("startup_s"), "torch": ready.get("torch")})
                got = w.call(f"build {side}", bench.left() if a.budget_s > 0 else 3600)
                if got.get("ok"):
                    entry[side] = {k: got[k] for k in ("compile_s", "graphs", "graph_breaks", "cudagraph_skips",
                                                       "peak_alloc_mib") if k in got}
                    entry[side]["wall_s"] = round(time.monotonic() - t, 1)
                    log(f"    compiled in {got['compile_s']:.1f} s")
                else:
                    entry[side] = {"error": got.get("error"), "traceback": tail(got.get("traceback", ""), 12)}
                    log(f"    FAILED: {got.get('error')}")
            except WorkerError as e:
                why = f"stopped at the deadline (--budget-s {a.budget_s:g}): {e}" if a.budget_s > 0 and bench.left() < 1 else str(e)
                entry[side] = {"error": why, "log": w.log_tail(12), "wall_s": round(time.monotonic() - t, 1)}
                log(f"    FAILED: {e}")
                w.kill()
                workers.pop(case)
            current.clear()
            write()
    except Stop as e:
        doc["stopped"] = str(e)
        if current:
            case, side, t = current
            doc["compiles"][case][side] = {"error": f"stopped ({e}) after {time.monotonic() - t:.1f} s of this compile",
                                           "wall_s": round(time.monotonic() - t, 1)}
    except Exception:  # noqa: BLE001 - the prewarm never fails the caller
        doc["stopped"] = "gpu_bench.py --prewarm failed:\n" + traceback.format_exc()
        log(doc["stopped"])
    finally:
        for w in workers.values():
            w.close()
        write()
        if not a.keep:
            shutil.rmtree(bench.tmp, ignore_errors=True)
    log(f"written: {path}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, default=ROOT / "build", help="torchhost build (bin/host, plugins/)")
    p.add_argument("--out", type=Path, required=True, help="where gpu-bench.md and gpu-bench.json go")
    p.add_argument("--models", default=",".join(CASES), help=f"cases, of {', '.join(CASES)}")
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--runs", type=int, default=3, help="runs per side and case (the budget may drop later ones)")
    p.add_argument("--steps", type=int, default=0, help="steps per run, all cases (0: per case)")
    p.add_argument("--window", type=int, default=0, help="steps per timing window (0: per case)")
    p.add_argument("--batch", type=int, default=0, help="batch size, all cases (0: per case)")
    p.add_argument("--image-size", type=int, default=0, help="image size, all cases (0: per case)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--python", default=sys.executable, help="interpreter of the Python sides")
    p.add_argument("--breakdown", default="resnet50_b256",
                   help="cases whose kernel time is broken down by category (host traced, python profiled); "
                        "'none': no breakdown")
    p.add_argument("--no-profile", dest="profile", action="store_false",
                   help="no kernel-time ceiling and no Python profiles (python eager's first run profiles a few steps)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="Inductor's and Triton's caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR=DIR/triton): "
                        "the prewarm's and the timed run's must be the same (default: the environment's, else a "
                        "temporary one)")
    p.add_argument("--prewarm", action="store_true",
                   help="compile the compiled sides cold into --cache-dir and record the times in "
                        "--prewarm-json (to run beside the build); no benchmark")
    p.add_argument("--prewarm-json", type=Path, default=None,
                   help=f"the prewarm's record: written by --prewarm, read by the benchmark (default OUT/{PREWARM_FILE})")
    p.add_argument("--alone", action="store_true", help="--prewarm: record that nothing else ran beside it")
    p.add_argument("--timeout-s", type=float, default=150, help="per run (a compiled side's first: twice this)")
    p.add_argument("--budget-s", type=float, default=230,
                   help="whole benchmark (or prewarm): a run starts only if its estimate fits in what is left "
                        "(0: no limit)")
    p.add_argument("--keep", action="store_true", help="keep the runs' directories and logs (printed)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (commands, priorities, estimates, what the budget would skip) and exit")
    a = p.parse_args()
    a.build = a.build.resolve()
    a.out = a.out.resolve()
    a.cache_dir = a.cache_dir.resolve() if a.cache_dir else None
    a.prewarm_json = (a.prewarm_json or a.out / PREWARM_FILE).resolve()
    a.models = a.models.split(",")
    a.sides = a.sides.split(",")
    a.breakdown = [] if a.breakdown in ("", "none") else a.breakdown.split(",")
    unknown = [m for m in a.models + a.breakdown if m not in CASES] + [s for s in a.sides if s not in ALL_SIDES]
    if unknown:
        p.error(f"unknown case or side: {', '.join(unknown)}")
    a.breakdown = [c for c in a.breakdown if c in a.models]
    if a.prewarm:
        if not a.cache_dir:
            p.error("--prewarm needs --cache-dir (the benchmark reads the same caches later)")
        return prewarm(a)
    bench = Bench(a)
    for case in a.models:
        m = bench.shape(case)
        if m["steps"] < 2 * m["window"]:
            p.error(f"{case}: {m['steps']} steps do not cover two windows of {m['window']} (the first is left out)")
    if a.keep:
        log(f"runs in {bench.tmp}")
    return bench.main()


if __name__ == "__main__":
    sys.exit(main())
