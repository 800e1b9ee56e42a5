"""GPU training benchmark: images/s and peak memory of the host, eager and with CUDA graphs, against a
Python eager loop, the same loop with torch.compile(mode="reduce-overhead"), and Lightning, on five
cases: small_cnn (batch 64 x 3x32x32), mlp (batch 128 x 3x32x32 flattened), ResNet-18 (batch 64 x
3x64x64, 100 classes), ResNet-50 (batch 128 and 256 x 3x224x224); bf16 autocast, channels-last
(4-D), cuDNN benchmark, fused SGD momentum 0.9 lr 0.1, synthetic in-memory data; plus each case's
kernel-time ceiling (bench/README.md, "GPU benchmark").

    python3 bench/train_speed/gpu_bench.py --build BUILD_DIR --out DIR [--models small_cnn,mlp,...]
        [--runs 2] [--steps N] [--sides host,host_graphs,python,compiled,lightning] [--budget-s 240]
        [--dry-run]
    CPU smoke test of the Python sides (no GPU, no build; the compiled side, --sides python,compiled,
    compiles C++ kernels for the CPU, about 30 s a case on 2 cores):
    .venv-bench/bin/python bench/train_speed/gpu_bench.py --out /tmp/gb --device cpu --sides python,lightning \\
        --models small_cnn,mlp --steps 6 --window 2 --batch 4 --image-size 32

The plan: every case's sides once (host, host_graphs, python, compiled, lightning), then every case
again with the sides reversed, the runs ordered by priority (Bench.priority: one figure per case
for host, host_graphs and python first; then the compiled side where its compilation is
affordable; second runs; Lightning; ResNet-50's compilation). A side's figure is the median of its
runs, each run 1 / median step time of its windows, the first window left out. The first python
run of each case also profiles a few steps after its timed loop: the kernel-time ceiling. Each run
has an estimated cost (start-up, autotuning, steps, compilation; scaled by what the runs of its
kind so far took against their estimates); with a budget a run starts only if its estimate fits
in what is left, so a short budget drops the least important runs. Writes DIR/gpu-bench.md (also
printed) and DIR/gpu-bench.json after every run, so a timeout or a failing side still leaves the
results so far. Needs only this interpreter's standard library; the sides run in subprocesses
(--python, default this interpreter).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SIDES = ("host", "host_graphs", "python", "compiled", "lightning")
LABELS = {"host": "host", "host_graphs": "host graphed", "python": "python eager",
          "compiled": "python compiled", "lightning": "lightning"}
HOST_SIDES = ("host", "host_graphs")
# Cases. steps = timed steps + one warm-up window (cuDNN autotuning, allocator warm-up, the host's
# graph capture, cudagraph trees' recording). est: the cost model of the plan (seconds on one H200
# or H100, from bench/gpu/2026-11-26-h200.md where measured, else estimated): step_ms, an eager step;
# warmup_s, cuDNN autotuning and first-use costs on every side; compile_s, a cold torch.compile of
# the training step (Inductor and Triton); profile_steps, the kernel-time ceiling's profiled steps.
CASES = {
    # small_cnn's plugin checks the input size against its own image_size key.
    "small_cnn": dict(model="small_cnn", toml="gpu_small_cnn.toml", plugin="plugins/vision_models.so", classes=10,
                      batch=64, size=32, steps=520, window=20, channels_last=True, lightning=True,
                      host_sets=("model.image_size={size}",),
                      est=dict(step_ms=2.7, warmup_s=0.5, compile_s=25, profile_steps=10)),
    "mlp": dict(model="mlp", toml="gpu_mlp.toml", plugin="plugins/vision_models.so", classes=10,
                batch=128, size=32, steps=520, window=20, channels_last=False, lightning=False,
                host_sets=("model.in_features={features}",),
                est=dict(step_ms=1.0, warmup_s=0.0, compile_s=15, profile_steps=10)),
    "resnet18": dict(model="resnet18", toml="gpu_resnet18.toml", plugin="plugins/resnet.so", classes=100,
                     batch=64, size=64, steps=220, window=20, channels_last=True, lightning=False, host_sets=(),
                     est=dict(step_ms=5.0, warmup_s=2.0, compile_s=45, profile_steps=5)),
    "resnet50": dict(model="resnet50", toml="gpu_resnet50.toml", plugin="plugins/resnet.so", classes=1000,
                     batch=128, size=224, steps=60, window=10, channels_last=True, lightning=True, host_sets=(),
                     est=dict(step_ms=31.3, warmup_s=6.0, compile_s=90, profile_steps=3)),
    "resnet50_b256": dict(model="resnet50", toml="gpu_resnet50.toml", plugin="plugins/resnet.so", classes=1000,
                          batch=256, size=224, steps=40, window=8, channels_last=True, lightning=False, host_sets=(),
                          est=dict(step_ms=62.5, warmup_s=8.0, compile_s=90, profile_steps=2)),
}
HEAVY = ("resnet50", "resnet50_b256")  # a torch.compile of ResNet-50 costs more than half the default budget
# Process start-up to the first step per side (H200: small_cnn's runs took 3.3-3.8 s on the host,
# 10.0-10.8 s in Python and 15.2-16.5 s in Lightning for 1.4 s of steps).
STARTUP_S = {"host": 2.0, "host_graphs": 2.5, "python": 8.0, "compiled": 8.0, "lightning": 13.0}
PROFILE_S = 3.0  # CUPTI's start and the profiled steps
WARM_COMPILE = 0.35  # a second compile of the same case reads Inductor's and Triton's caches
COMPILE_WARMUP = 3  # untimed steps of the compiled side: compile, cudagraph trees' warm-up, recording
HOST_MEMORY_KEY = "memory/peak_mb"  # training_report.cpp: peak bytes allocated by tensors / 1e6
GOAL_GRAPHS_VS_PYTHON = 3.0  # small_cnn and mlp
GOAL_GRAPHS_VS_COMPILED = 1.0  # every case
GOAL_GRAPHS_VS_HOST = 1.0  # ResNet-50: graphed no slower than eager
# What Triton needs to build its launcher (triton/runtime/build.py): Python.h and a C compiler. Run
# with the sides' interpreter before the plan, so a machine without them skips the compiled side
# at no cost instead of failing it once per case.
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


class Stop(Exception):
    """SIGTERM/SIGINT: write what there is and leave."""


def log(msg):
    print(msg, flush=True)


def tail(text, n=20):
    return "\n".join(text.rstrip().splitlines()[-n:])


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


class Bench:
    def __init__(self, a):
        self.a = a
        self.t0 = time.monotonic()
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_bench_"))
        self.child = None
        self.results = {}  # case -> side -> list of run dicts
        self.ceilings = {}  # case -> the python side's profile figures
        self.info = {}
        self.ratios = {}  # side group -> [actual wall / estimate]
        self.compile_blocker = ""  # why the compiled side cannot run here

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
        return [s for s in SIDES if s in self.a.sides and (s != "lightning" or CASES[case]["lightning"])]

    def command(self, case, side, r, run_dir):
        m, a = self.shape(case), self.a
        if side in HOST_SIDES:
            sets = [f"train.batch_size={m['batch']}", f"train.log_every_steps={m['window']}",
                    f"data.train.size={m['steps'] * m['batch']}", f"data.train.image_size={m['size']}",
                    *[s.format(size=m["size"], features=3 * m["size"] ** 2) for s in m["host_sets"]]]
            if a.device != "cuda":
                sets.append(f'run.device="{a.device}"')
            if side == "host_graphs":
                sets.append('run.cuda_graphs="on"')
            return [str(a.build / "bin/host"), "--config", str(HERE / m["toml"]), "--output-dir", str(run_dir),
                    "--plugin-dir", str(a.build / "bench/plugins"), *[x for s in sets for x in ("--set", s)]]
        script = "lightning_loop.py" if side == "lightning" else "python_loop.py"
        cmd = [a.python, str(HERE / script), "--model", m["model"], "--classes", str(m["classes"]),
               "--batch", str(m["batch"]), "--image-size", str(m["size"]), "--precision", "bf16",
               "--device", a.device, "--steps", str(m["steps"]), "--window", str(m["window"]),
               "--pool", "256", "--lr", "0.1", "--fused", "--cudnn-benchmark"]
        if m["channels_last"]:
            cmd.append("--channels-last")
        if side == "compiled":
            cmd += ["--compile", "reduce-overhead", "--compile-warmup", str(COMPILE_WARMUP)]
        if side == "python" and r == 0 and a.device == "cuda" and a.profile:
            cmd += ["--profile-steps", str(m["est"]["profile_steps"])]
        return cmd

    def env(self, side):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if side == "compiled":
            # One cache for the benchmark: each case's first compile is cold, its second reads it.
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(self.tmp / "inductor-cache"))
        return env

    # ---- the plan ----
    def priority(self, case, r, side):
        """0 first: run 1 of host, host_graphs and python in every case (every case's main figures
        and its kernel-time ceiling); 1: the compiled side's run 1 where its compilation is
        affordable; 2, 3: run 2 of host, host_graphs and python, the cheap cases, then ResNet-18; 4:
        Lightning's run 1; 5: the compiled side's run 2 (from the cache); 6: ResNet-50's compilation;
        7: ResNet-50's run 2; 8: the rest."""
        heavy = case in HEAVY
        if side == "lightning":
            return 4 if r == 0 else 8
        if side == "compiled":
            return (6 if heavy else 1) if r == 0 else (8 if heavy else 5)
        if r == 0:
            return 0
        return 7 if heavy else 3 if case == "resnet18" else 2

    def estimate(self, case, r, side):
        m, est = self.shape(case), CASES[case]["est"]
        scale = m["batch"] / CASES[case]["batch"] * (m["size"] / CASES[case]["size"]) ** 2
        seconds = STARTUP_S[side] + est["warmup_s"] + m["steps"] * est["step_ms"] * scale / 1000
        if side == "compiled":
            seconds += est["compile_s"] * (WARM_COMPILE if r > 0 else 1.0)
        if side == "lightning":
            seconds += m["steps"] * est["step_ms"] * scale / 1000 * 0.2  # its per-step hooks
        if side == "python" and r == 0 and self.a.profile:
            seconds += PROFILE_S
        return seconds

    @staticmethod
    def group(side):
        return "host" if side in HOST_SIDES else side

    def factor(self, side):
        """How much longer than estimated this side's runs took so far (1 before the first)."""
        got = self.ratios.get(self.group(side))
        return min(3.0, max(0.5, statistics.median(got))) if got else 1.0

    def plan(self):
        """(case, run index, side, priority) in the order they run: by priority, and within one
        priority run 1 of every case before run 2, each case's sides in order in run 1 and reversed
        in run 2. So the runs that give every case a figure per side come first, and what a spent
        budget drops is what matters least."""
        out = []
        for r in range(self.a.runs):
            for case in self.a.models:
                sides = self.sides(case)
                for side in sides if r % 2 == 0 else sides[::-1]:
                    out.append((case, r, side, self.priority(case, r, side)))
        return sorted(out, key=lambda x: x[3])  # stable: the order above within a priority

    def decide(self, case, r, side, elapsed):
        """None to run it, else why not: the budget, or an earlier failure of the same case and side."""
        if side == "compiled" and self.compile_blocker:
            return f"not run: torch.compile cannot build Triton kernels here, missing {self.compile_blocker}"
        failed = lambda x: "error" in x and not x["error"].startswith(("skipped", "not run"))  # noqa: E731
        if side == "compiled" and sum(failed(x) for runs in self.results.values() for x in runs.get("compiled", [])) >= 2:
            return "not run: the compiled side failed twice already (errors above)"
        for x in self.results.get(case, {}).get(side, []):
            if failed(x):
                return f"not run: run {x['run']} of this side failed (below)"
        if self.a.budget_s <= 0:
            return None
        left = self.a.budget_s - elapsed
        need = self.estimate(case, r, side) * self.factor(side)
        if left < 5 or left < need:
            reason = f"skipped (budget): ~{need:.0f} s estimated, {max(left, 0):.0f} s of --budget-s {self.a.budget_s:g} left"
            if side == "compiled" and case in HEAVY and r == 0:
                reason += (f"; a cold torch.compile of ResNet-50 is estimated at ~{CASES[case]['est']['compile_s']} s "
                           f"(alone: --models {case} --sides python,compiled --budget-s 0)")
            return reason
        return None

    # ---- running ----
    def run_one(self, case, r, side):
        run_dir = self.tmp / f"{case}-{side}-{r + 1}"
        cmd = self.command(case, side, r, run_dir)
        rec = {"run": r + 1, "cmd": shlex.join(cmd), "estimate_s": round(self.estimate(case, r, side), 1)}
        if side in HOST_SIDES:
            missing = [p for p in ("bin/host", CASES[case]["plugin"], "plugins/basic_losses.so",
                                   "bench/plugins/bench_tensor_pool.so") if not (self.a.build / p).exists()]
            if missing:
                rec["error"] = f"not built in {self.a.build}: {', '.join(missing)}"
                return rec
        left = self.a.budget_s - (time.monotonic() - self.t0) if self.a.budget_s > 0 else float("inf")
        timeout = min(self.a.timeout_s * (2 if side == "compiled" else 1), left)
        start = time.monotonic()
        with open(self.tmp / f"{run_dir.name}.log", "w+") as out:
            # Own session: a timeout or SIGTERM ends the side with its threads and children.
            self.child = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True, env=self.env(side))
            try:
                rc = self.child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                if self.child.poll() is None:
                    os.killpg(self.child.pid, signal.SIGKILL)
                    self.child.wait()
                self.child = None
            out.seek(0)
            text = out.read()
        rec["wall_s"] = round(time.monotonic() - start, 1)
        try:
            if rc is None:
                raise RuntimeError(f"timed out after {timeout:.0f} s")
            if rc != 0:
                raise RuntimeError(f"exit status {rc}")
            rec.update(self.parse_host(run_dir, text) if side in HOST_SIDES else self.parse_loop(case, side, text))
            rec["images_per_s"] = rec["steps_per_s"] * self.shape(case)["batch"]
            self.ratios.setdefault(self.group(side), []).append(rec["wall_s"] / rec["estimate_s"])
        except Exception as e:  # noqa: BLE001 - any failure of one side is recorded, the others go on
            rec["error"] = f"{e}\n{tail(text)}"
        return rec

    def parse_host(self, run_dir, text):
        rows = [json.loads(line) for line in open(run_dir / "history.jsonl") if line.strip()]
        steps = [r for r in rows if "time/step_s" in r][1:]
        if not steps:
            raise RuntimeError("no step records after the first window in history.jsonl")
        rec = {"steps_per_s": 1 / statistics.median(r["time/step_s"] for r in steps), "windows": len(steps)}
        if any("time/data_wait_s" in r for r in steps):
            rec["data_wait"] = statistics.median(r.get("time/data_wait_s", 0) / r["time/step_s"] for r in steps)
        peaks = [r[HOST_MEMORY_KEY] for r in rows if HOST_MEMORY_KEY in r]
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
        return rec

    def parse_loop(self, case, side, text):
        label = "lightning" if side == "lightning" else "compiled" if side == "compiled" else "python"
        m = re.search(rf"^{label} steps_per_s=([0-9.]+)(.*)$", text, re.M)
        if not m:
            raise RuntimeError(f"no '{label} steps_per_s=' line")
        rec = {"steps_per_s": float(m.group(1))}
        for key, text_value in re.findall(r"(\w+)=(\S+)", m.group(2)):
            if key in ("torch", "lightning"):
                self.info[key] = text_value
            else:
                rec[key] = value(text_value)
        if p := re.search(rf"^{label} profile (.*)$", text, re.M):
            if p.group(1).startswith("failed"):
                rec["profile_error"] = p.group(1)
            else:
                prof = {key: value(v) for key, v in re.findall(r"(\w+)=(\S+)", p.group(1))}
                if prof.get("kernel_ms", 0) > 0:
                    self.ceilings[case] = prof
                else:
                    rec["profile_error"] = "the profiler saw no CUDA kernels (CUPTI unavailable?)"
        return rec

    def stop(self, signum, frame):
        if self.child is not None and self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGKILL)
        raise Stop(f"stopped by signal {signum}")

    def dry_run(self, plan):
        """The commands, each run's priority and estimate, and what the budget would skip if every
        run took its estimate."""
        elapsed = 0.0
        for case, r, side, prio in plan:
            cmd = self.command(case, side, r, self.tmp / f"{case}-{side}-{r + 1}")
            est = self.estimate(case, r, side)
            why = self.decide(case, r, side, elapsed)
            if why is None:
                elapsed += est
            log(f"# {case} run {r + 1} {side}: priority {prio}, ~{est:.0f} s"
                + (f", {why}" if why else f", starts at ~{elapsed - est:.0f} s") + f"\n{shlex.join(cmd)}")
        log(f"# estimated: {elapsed:.0f} s of runs" + (f" within --budget-s {self.a.budget_s:g}" if self.a.budget_s > 0 else ""))

    def main(self):
        a = self.a
        plan = self.plan()
        if a.dry_run:
            self.dry_run(plan)
            shutil.rmtree(self.tmp, ignore_errors=True)
            return 0
        a.out.mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        status = 0
        current = None  # the run in flight, for a stop
        try:
            self.probe()
            for i, (case, r, side, prio) in enumerate(plan):
                elapsed = time.monotonic() - self.t0
                why = self.decide(case, r, side, elapsed)
                if why is not None:
                    rec = {"run": r + 1, "error": why, "estimate_s": round(self.estimate(case, r, side), 1)}
                    log(f"[{elapsed:5.0f} s] {i + 1}/{len(plan)} {case} run {r + 1}: {side}: {why}")
                else:
                    log(f"[{elapsed:5.0f} s] {i + 1}/{len(plan)} {case} run {r + 1}: {side} "
                        f"(priority {prio}, ~{self.estimate(case, r, side) * self.factor(side):.0f} s) ...")
                    current = (case, r, side)
                    rec = self.run_one(case, r, side)
                    current = None
                    if "error" in rec:
                        log(f"    {side}: FAILED: {rec['error'].splitlines()[0]}")
                    else:
                        log(f"    {side}: {rec['images_per_s']:.1f} images/s ({rec['wall_s']} s)")
                self.results.setdefault(case, {}).setdefault(side, []).append(rec)
                self.write()
        except (Stop, Exception) as e:  # noqa: BLE001 - a bug here must still leave the table
            self.info["stopped"] = str(e) if isinstance(e, Stop) else "gpu_bench.py failed:\n" + traceback.format_exc()
            if current is not None:
                case, r, side = current
                self.results.setdefault(case, {}).setdefault(side, []).append({"run": r + 1, "error": str(e)})
            log(self.info["stopped"])
            status = 1
        finally:
            text = self.write()
            if not a.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
        log("")
        log(text)
        log(f"written: {a.out / 'gpu-bench.md'}, {a.out / 'gpu-bench.json'}")
        return status

    def probe(self):
        """Device name and versions, without initialising CUDA in this process; whether the sides'
        interpreter can build Triton kernels (the compiled side)."""
        self.info.update(torch=version("torch"), lightning=version("lightning") or version("pytorch_lightning"),
                         device=self.a.device)
        if "compiled" in self.a.sides and self.a.device == "cuda":
            try:
                out = subprocess.run([self.a.python, "-c", COMPILE_CHECK], capture_output=True, text=True, timeout=30)
                self.compile_blocker = out.stdout.strip() if out.returncode == 0 else f"(check failed: {tail(out.stderr, 1)})"
            except (OSError, subprocess.TimeoutExpired) as e:
                self.compile_blocker = f"(check failed: {e})"
            if self.compile_blocker:
                self.info["compile_blocker"] = self.compile_blocker
        if self.a.device != "cuda":
            return
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                name, driver = [f.strip() for f in out.stdout.splitlines()[0].split(",")][:2]
                self.info.update(device=name, driver=driver)
                return
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
        try:
            out = subprocess.run([self.a.python, "-c", "import torch; print(torch.cuda.get_device_name())"],
                                 capture_output=True, text=True, timeout=60)
            self.info["device"] = out.stdout.strip() or "cuda (unknown: " + tail(out.stderr, 1) + ")"
        except (OSError, subprocess.TimeoutExpired) as e:
            self.info["device"] = f"cuda (unknown: {e})"

    # ---- report ----
    def summary(self, case):
        got = {}
        for side, runs in self.results.get(case, {}).items():
            ok = [r for r in runs if "error" not in r]
            s = {"runs_images_per_s": [r["images_per_s"] for r in ok], "errors": [r for r in runs if "error" in r]}
            if ok:
                s["images_per_s"] = statistics.median(s["runs_images_per_s"])
                for key in ("peak_alloc_mib", "peak_reserved_mib", "data_wait", "params"):
                    values = [r[key] for r in ok if key in r]
                    if values:
                        s[key] = max(values)
                for key in ("compile_s", "graphs", "graph_breaks", "cudagraph_skips"):
                    values = [r[key] for r in ok if key in r]
                    if values:
                        s[key] = values  # per run: the first cold, later ones from the cache
                for key in ("graphs_log", "runtime_cuda_graphs", "graphed"):
                    values = [r[key] for r in ok if key in r]
                    if values:
                        s[key] = values[0]
            got[side] = s
        return got

    def ceiling(self, case):
        """The kernel-time ceiling: batch / the python eager step's kernel time, or None."""
        prof = self.ceilings.get(case)
        if not prof:
            return None
        return {**prof, "images_per_s": self.shape(case)["batch"] / (prof["kernel_ms"] / 1000),
                "with_copies_images_per_s": self.shape(case)["batch"] / ((prof["kernel_ms"] + prof.get("copy_ms", 0)) / 1000)}

    @staticmethod
    def ratio(s, a, b):
        x, y = s.get(a, {}).get("images_per_s"), s.get(b, {}).get("images_per_s")
        return x / y if x and y else None

    def goals(self, sums):
        out = []

        def goal(case, side, target, text):
            if case not in self.a.models:
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
            goal(case, "compiled", GOAL_GRAPHS_VS_COMPILED,
                 f"host graphed >= {GOAL_GRAPHS_VS_COMPILED:g}x torch.compile reduce-overhead")
        for case in HEAVY:
            goal(case, "host", GOAL_GRAPHS_VS_HOST, "host graphed no slower than host eager")
        return out

    def write(self):
        a = self.a
        sums = {case: self.summary(case) for case in self.results}
        goals = self.goals(sums)
        doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "info": self.info, "runs_per_side": a.runs, "budget_s": a.budget_s,
               "elapsed_s": round(time.monotonic() - self.t0, 1),
               "shapes": {c: self.shape(c) for c in a.models}, "results": self.results, "summary": sums,
               "ceilings": {c: self.ceiling(c) for c in a.models if self.ceiling(c)}, "goals": goals,
               "estimate_factors": {g: round(self.factor(g), 2) for g in self.ratios}}
        (a.out / "gpu-bench.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        try:
            text = self.markdown(sums, goals, doc)
        except Exception:  # noqa: BLE001 - the raw figures, if the table cannot be made
            text = ("# GPU training benchmark: the table failed\n\n```\n" + traceback.format_exc() + "```\n\n```json\n"
                    + json.dumps(doc, indent=1, default=str) + "\n```\n")
        (a.out / "gpu-bench.md").write_text(text)
        return text

    @staticmethod
    def fmt(x, digits=3):
        return f"{x:.{digits}f}" if x is not None else "-"

    def markdown(self, sums, goals, doc):
        a, info = self.a, self.info
        L = ["# GPU training benchmark (bench/train_speed/gpu_bench.py)", "",
             f"- device: {info.get('device')}" + (f" (driver {info['driver']})" if info.get("driver") else ""),
             f"- Python sides: torch {info.get('torch')}, lightning {info.get('lightning')}; "
             f"host: {a.build} (LibTorch {info.get('host_libtorch', '?')})",
             f"- {doc['date']}, {doc['elapsed_s']} s (--budget-s {a.budget_s:g}); up to {a.runs} runs per side, "
             "alternating (host, host graphed, python, compiled, lightning; then reversed); images/s = batch / "
             "median window step time of a run (first window left out), the table's figure the median of the runs",
             "- all sides: bf16 autocast, channels-last model and input (4-D models), cuDNN benchmark, SGD momentum "
             "0.9 lr 0.1 (no weight decay), **fused** on every side (LibTorch's on the host, `fused=True` in "
             "Python), synthetic in-memory pool of 256 samples copied from pinned memory each step",
             "- host graphed: the host command plus `--set run.cuda_graphs=\"on\"` (forward, loss, backward and "
             "fused optimizer step captured as one CUDA graph after eager warm-up steps); python compiled: "
             f"`torch.compile(model, mode=\"reduce-overhead\")`, loss and optimizer step eager, {COMPILE_WARMUP} "
             "untimed steps first (their time is the compile column: the first run's cold, a second from the cache)",
             "- kernel-time ceiling: the first python eager run profiles a few steps after its timed loop "
             "(torch.profiler, CUDA activity): the sum of its kernels' device time per step, memcpy/memset apart; "
             "ceiling = batch / kernel time"]
        if info.get("compile_blocker"):
            L.append(f"- **compiled side not run**: torch.compile cannot build Triton kernels here, missing "
                     f"{info['compile_blocker']}")
        if info.get("stopped"):
            first, _, rest = info["stopped"].partition("\n")
            L.append(f"- **incomplete**: {first}")
            if rest:
                L += ["", "```", rest.rstrip(), "```"]
        L += ["", "## Summary (images/s)", "",
              "| case | host | host graphed | python eager | compiled | lightning | graphed / python | "
              "graphed / compiled | graphed / host | kernel-time ceiling | graphed / ceiling |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for case in a.models:
            s, c = sums.get(case, {}), self.ceiling(case)
            cells = []
            for side in SIDES:
                x = s.get(side, {})
                cells.append(f"{x['images_per_s']:.0f}" if x.get("images_per_s") else
                             "n/a" if side not in self.sides(case) else "failed" if any(
                                 not e["error"].startswith(("skipped", "not run")) for e in x.get("errors", []))
                             else "skipped" if x else "not run")
            g = s.get("host_graphs", {}).get("images_per_s")
            cells += [self.fmt(self.ratio(s, "host_graphs", other)) for other in ("python", "compiled", "host")]
            cells += [f"{c['images_per_s']:.0f}" if c else "-", self.fmt(g / c["images_per_s"] if g and c else None)]
            L.append(f"| {case} | " + " | ".join(cells) + " |")
        L.append("")
        for case in a.models:
            L += self.case_section(case, sums.get(case, {}))
        L += ["## Goals", ""]
        for g in goals:
            verdict = (f"{g['ratio']:.3f}: **{'met' if g['met'] else 'not met'}**" if g["met"] is not None
                       else f"n/a ({g['why']})")
            L.append(f"- {g['case']}: {g['text']}: {verdict}")
        return "\n".join(L) + "\n"

    def case_section(self, case, s):
        m, c = self.shape(case), self.ceiling(case)
        L = [f"## {case}: {m['model']}, batch {m['batch']} x 3x{m['size']}x{m['size']}, {m['classes']} classes, "
             f"{m['steps']} steps (windows of {m['window']}, {m['steps'] - m['window']} timed)", "",
             "| side | images/s | runs | host graphed / side | peak allocated MiB | peak reserved MiB | notes |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
        graphed = s.get("host_graphs", {}).get("images_per_s")
        for side in self.sides(case):
            x = s.get(side, {})
            ips = x.get("images_per_s")
            runs = ", ".join(f"{v:.1f}" for v in x.get("runs_images_per_s", [])) or "-"
            ratio = f"{graphed / ips:.3f}" if graphed and ips and side != "host_graphs" else "-"
            alloc = f"{x['peak_alloc_mib']:.0f}" if "peak_alloc_mib" in x else "-"
            reserved = f"{x['peak_reserved_mib']:.0f}" if "peak_reserved_mib" in x else "-"
            notes = []
            if side in HOST_SIDES:
                notes.append("LibTorch's fused SGD")
                notes.append(f"memory: max of history `{HOST_MEMORY_KEY}` (allocated; reserved is not logged)")
                if "data_wait" in x:
                    notes.append(f"data wait {x['data_wait']:.1%}")
                if side == "host_graphs":
                    if x.get("runtime_cuda_graphs"):
                        notes.append(f"runtime.toml [cuda_graphs] state: `{x['runtime_cuda_graphs']}`")
                    if x.get("graphed") is False:
                        notes.append("**not graphed** (runtime.toml graphed = false)")
                    if x.get("graphs_log"):
                        notes.append("log: " + " / ".join(f"`{line[:120]}`" for line in x["graphs_log"]))
            elif side == "python":
                notes.append("torch.optim.SGD(fused=True)")
            elif side == "compiled":
                notes.append("torch.compile reduce-overhead, fused SGD eager")
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
            failed = [e for e in errors if not e["error"].startswith(("skipped", "not run"))]
            if failed:
                notes.append(f"**{len(failed)} failed run(s)**, below")
            reasons = {}  # skipped or not run: each reason once, with its runs
            for e in errors:
                if e not in failed:
                    reasons.setdefault(e["error"], []).append(str(e["run"]))
            notes += [f"run {', '.join(runs)} {why}" for why, runs in reasons.items()]
            L.append(f"| {LABELS[side]} | {f'{ips:.1f}' if ips else 'failed' if failed else 'not run'} | {runs} | "
                     f"{ratio} | {alloc} | {reserved} | {'; '.join(notes)} |")
        params = {side: x["params"] for side, x in s.items() if "params" in x}
        if len(set(params.values())) > 1:
            L.append(f"\nWARNING: parameter counts differ between sides: {params}")
        L.append("")
        if c:
            reach = [f"{LABELS[side]} {s[side]['images_per_s'] / c['images_per_s']:.0%}" for side in SIDES
                     if s.get(side, {}).get("images_per_s")]
            L += [f"Kernel-time ceiling: {c['kernel_ms']:.3f} ms of kernels per step ({c.get('kernels_per_step', 0):.0f} "
                  f"kernels; memcpy/memset {c.get('copy_ms', 0):.3f} ms more), over {c.get('profiled_steps', '?')} "
                  f"profiled python eager steps: **{c['images_per_s']:.0f} images/s** "
                  f"({c['with_copies_images_per_s']:.0f} with the copies). Reached: {', '.join(reach) or '-'}.", ""]
        else:
            why = [r["profile_error"] for r in self.results.get(case, {}).get("python", []) if "profile_error" in r]
            L += ["Kernel-time ceiling: not measured (" + (why[0] if why else "the first python eager run did not "
                                                           "profile") + ").", ""]
        for side in self.sides(case):
            for e in s.get(side, {}).get("errors", []):
                if e["error"].startswith(("skipped", "not run")):
                    continue
                cmd = f": `{e['cmd']}`" if "cmd" in e else ""
                L += [f"{LABELS[side]}, run {e['run']}{cmd}", "", "```", e["error"], "```", ""]
        return L


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, default=ROOT / "build", help="torchhost build (bin/host, plugins/)")
    p.add_argument("--out", type=Path, required=True, help="where gpu-bench.md and gpu-bench.json go")
    p.add_argument("--models", default=",".join(CASES), help=f"cases, of {', '.join(CASES)}")
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--runs", type=int, default=2, help="runs per side and case (the budget may drop later ones)")
    p.add_argument("--steps", type=int, default=0, help="steps per run, all cases (0: per case)")
    p.add_argument("--window", type=int, default=0, help="steps per timing window (0: per case)")
    p.add_argument("--batch", type=int, default=0, help="batch size, all cases (0: per case)")
    p.add_argument("--image-size", type=int, default=0, help="image size, all cases (0: per case)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--python", default=sys.executable, help="interpreter of the Python sides")
    p.add_argument("--no-profile", dest="profile", action="store_false",
                   help="no kernel-time ceiling (the first python run profiles a few steps)")
    p.add_argument("--timeout-s", type=float, default=150, help="per run (the compiled side: twice this)")
    p.add_argument("--budget-s", type=float, default=240,
                   help="whole benchmark: a run starts only if its estimate fits beside the more important "
                        "runs still to come (0: no limit)")
    p.add_argument("--keep", action="store_true", help="keep the runs' directories and logs (printed)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (commands, priorities, estimates, what the budget would skip) and exit")
    a = p.parse_args()
    a.build = a.build.resolve()
    a.out = a.out.resolve()
    a.models = a.models.split(",")
    a.sides = a.sides.split(",")
    unknown = [m for m in a.models if m not in CASES] + [s for s in a.sides if s not in SIDES]
    if unknown:
        p.error(f"unknown case or side: {', '.join(unknown)}")
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
