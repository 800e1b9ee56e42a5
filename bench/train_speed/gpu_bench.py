"""GPU training benchmark: images/s and peak memory of the host vs a Python eager loop vs Lightning,
ResNet-50 (batch 128 x 3x224x224) and small_cnn (batch 64 x 3x32x32, launch-bound), bf16
autocast, channels-last, cuDNN benchmark, SGD momentum 0.9 lr 0.1, synthetic in-memory data
(bench/README.md, "GPU benchmark").

    python3 bench/train_speed/gpu_bench.py --build BUILD_DIR --out DIR [--models resnet50,small_cnn]
        [--runs 2] [--steps N] [--sides host,python,lightning] [--budget-s 200] [--dry-run]
    CPU smoke test of the Python sides (no GPU, no build):
    .venv-bench/bin/python bench/train_speed/gpu_bench.py --out /tmp/gb --device cpu --sides python,lightning \
        --steps 6 --window 2 --batch 4 --image-size 32

Runs every side --runs times per model, alternating the order (host, python, lightning; then
reversed); the figure is the median of the runs, each run 1 / median step time of its windows, the
first window left out. Writes DIR/gpu-bench.md (also printed) and DIR/gpu-bench.json after every
run, so a timeout or a failing side still leaves the results so far. Needs only this interpreter's
standard library; the sides run in subprocesses (--python, default this interpreter).
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
SIDES = ("host", "python", "lightning")
LABELS = {"host": "host", "python": "python eager", "lightning": "lightning"}
# steps = timed steps + one warm-up window (cuDNN autotuning, allocator warm-up).
MODELS = {
    "resnet50": dict(toml="gpu_resnet50.toml", plugin="plugins/resnet.so", classes=1000, batch=128, size=224,
                     steps=110, window=10, model_image_size=False),
    # small_cnn's plugin checks the input size against its own image_size key.
    "small_cnn": dict(toml="gpu_small_cnn.toml", plugin="plugins/vision_models.so", classes=10, batch=64, size=32,
                      steps=520, window=20, model_image_size=True),
}
HOST_MEMORY_KEY = "memory/peak_mb"  # training_report.cpp: peak bytes allocated by tensors / 1e6


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


class Bench:
    def __init__(self, a):
        self.a = a
        self.t0 = time.monotonic()
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_bench_"))
        self.child = None
        self.results = {}  # model -> side -> list of run dicts
        self.info = {}

    # ---- commands ----
    def shape(self, model):
        m = dict(MODELS[model])
        a = self.a
        for key in ("steps", "window", "batch"):
            if getattr(a, key):
                m[key] = getattr(a, key)
        if a.image_size:
            m["size"] = a.image_size
        return m

    def command(self, model, side, run_dir):
        m, a = self.shape(model), self.a
        if side == "host":
            sets = [f"train.batch_size={m['batch']}", f"train.log_every_steps={m['window']}",
                    f"data.train.size={m['steps'] * m['batch']}", f"data.train.image_size={m['size']}"]
            if m["model_image_size"]:
                sets.append(f"model.image_size={m['size']}")
            if a.device != "cuda":
                sets.append(f'run.device="{a.device}"')
            return [str(a.build / "bin/host"), "--config", str(HERE / m["toml"]), "--output-dir", str(run_dir),
                    "--plugin-dir", str(a.build / "bench/plugins"), *[x for s in sets for x in ("--set", s)]]
        script = "python_loop.py" if side == "python" else "lightning_loop.py"
        return [a.python, str(HERE / script), "--model", model, "--classes", str(m["classes"]),
                "--batch", str(m["batch"]), "--image-size", str(m["size"]), "--precision", "bf16",
                "--device", a.device, "--steps", str(m["steps"]), "--window", str(m["window"]),
                "--pool", "256", "--lr", "0.1", "--channels-last", "--cudnn-benchmark"]

    def plan(self):
        """(model, run index, side) in the order they run: run 1 of every model before run 2, so a
        spent budget still leaves each case a figure per side."""
        sides = [s for s in SIDES if s in self.a.sides]
        return [(model, r, side) for r in range(self.a.runs) for model in self.a.models
                for side in (sides if r % 2 == 0 else sides[::-1])]

    # ---- running ----
    def run_one(self, model, r, side):
        run_dir = self.tmp / f"{model}-{side}-{r + 1}"
        cmd = self.command(model, side, run_dir)
        rec = {"run": r + 1, "cmd": shlex.join(cmd)}
        left = self.a.budget_s - (time.monotonic() - self.t0) if self.a.budget_s > 0 else self.a.timeout_s
        if left < 15:
            rec["error"] = f"skipped: the time budget (--budget-s {self.a.budget_s:g}) is spent"
            return rec
        if side == "host":
            missing = [p for p in ("bin/host", MODELS[model]["plugin"], "plugins/basic_losses.so",
                                   "bench/plugins/bench_tensor_pool.so") if not (self.a.build / p).exists()]
            if missing:
                rec["error"] = f"not built in {self.a.build}: {', '.join(missing)}"
                return rec
        start = time.monotonic()
        timeout = min(self.a.timeout_s, left)
        with open(self.tmp / f"{run_dir.name}.log", "w+") as out:
            # Own session: a timeout or SIGTERM ends the side with its threads and children.
            self.child = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
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
            rec.update(self.parse_host(run_dir, text) if side == "host" else self.parse_loop(side, text))
            rec["images_per_s"] = rec["steps_per_s"] * self.shape(model)["batch"]
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
        if (run_dir / "runtime.toml").exists():
            if m := re.search(r'^libtorch = "([^"]+)"', (run_dir / "runtime.toml").read_text(), re.M):
                self.info["host_libtorch"] = m.group(1)
        return rec

    def parse_loop(self, side, text):
        m = re.search(rf"^{side} steps_per_s=([0-9.]+)(.*)$", text, re.M)
        if not m:
            raise RuntimeError(f"no '{side} steps_per_s=' line")
        rec = {"steps_per_s": float(m.group(1))}
        for key, value in re.findall(r"(\w+)=(\S+)", m.group(2)):
            if key in ("torch", "lightning"):
                self.info[key] = value
            else:
                rec[key] = float(value) if "." in value else int(value)
        return rec

    def stop(self, signum, frame):
        if self.child is not None and self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGKILL)
        raise Stop(f"stopped by signal {signum}")

    def main(self):
        a = self.a
        plan = self.plan()
        if a.dry_run:
            for model, r, side in plan:
                cmd = self.command(model, side, self.tmp / f"{model}-{side}-{r + 1}")
                log(f"# {model} run {r + 1} {side}\n{shlex.join(cmd)}")
            shutil.rmtree(self.tmp, ignore_errors=True)
            return 0
        a.out.mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        status = 0
        current = None  # the run in flight, for a stop
        try:
            self.probe()
            for i, (model, r, side) in enumerate(plan):
                log(f"[{time.monotonic() - self.t0:5.0f} s] {i + 1}/{len(plan)} {model} run {r + 1}: {side} ...")
                current = (model, r, side)
                rec = self.run_one(model, r, side)
                self.results.setdefault(model, {}).setdefault(side, []).append(rec)
                current = None
                if "error" in rec:
                    log(f"    {side}: FAILED: {rec['error'].splitlines()[0]}")
                else:
                    log(f"    {side}: {rec['images_per_s']:.1f} images/s ({rec['wall_s']} s)")
                self.write()
        except (Stop, Exception) as e:  # noqa: BLE001 - a bug here must still leave the table
            self.info["stopped"] = str(e) if isinstance(e, Stop) else "gpu_bench.py failed:\n" + traceback.format_exc()
            if current is not None:
                model, r, side = current
                self.results.setdefault(model, {}).setdefault(side, []).append({"run": r + 1, "error": str(e)})
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
        """Device name and versions, without initialising CUDA in this process."""
        self.info.update(torch=version("torch"), lightning=version("lightning") or version("pytorch_lightning"),
                         device=self.a.device)
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
    def summary(self, model):
        got = {}
        for side, runs in self.results.get(model, {}).items():
            ok = [r for r in runs if "error" not in r]
            s = {"runs_images_per_s": [r["images_per_s"] for r in ok], "errors": [r for r in runs if "error" in r]}
            if ok:
                s["images_per_s"] = statistics.median(s["runs_images_per_s"])
                for key in ("peak_alloc_mib", "peak_reserved_mib", "data_wait", "params"):
                    values = [r[key] for r in ok if key in r]
                    if values:
                        s[key] = max(values)
            got[side] = s
        return got

    def goals(self, sums):
        r = sums.get("resnet50", {})
        h = r.get("host", {}).get("images_per_s")
        out = []
        for side, goal in (("python", 1.05), ("lightning", 1.0)):
            o = r.get(side, {}).get("images_per_s")
            ratio = h / o if h and o else None
            out.append({"against": side, "goal": goal, "ratio": ratio,
                        "met": None if ratio is None else ratio >= goal})
        return out

    def write(self):
        a = self.a
        sums = {model: self.summary(model) for model in self.results}
        goals = self.goals(sums)
        doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "info": self.info, "runs_per_side": a.runs, "elapsed_s": round(time.monotonic() - self.t0, 1),
               "shapes": {m: self.shape(m) for m in a.models}, "results": self.results, "summary": sums,
               "goals": goals}
        (a.out / "gpu-bench.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        try:
            text = self.markdown(sums, goals, doc)
        except Exception:  # noqa: BLE001 - the raw figures, if the table cannot be made
            text = ("# GPU training benchmark: the table failed\n\n```\n" + traceback.format_exc() + "```\n\n```json\n"
                    + json.dumps(doc, indent=1, default=str) + "\n```\n")
        (a.out / "gpu-bench.md").write_text(text)
        return text

    def markdown(self, sums, goals, doc):
        a, info = self.a, self.info
        L = ["# GPU training benchmark (bench/train_speed/gpu_bench.py)", "",
             f"- device: {info.get('device')}" + (f" (driver {info['driver']})" if info.get("driver") else ""),
             f"- Python sides: torch {info.get('torch')}, lightning {info.get('lightning')}; "
             f"host: {a.build} (LibTorch {info.get('host_libtorch', '?')})",
             f"- {doc['date']}, {doc['elapsed_s']} s; {a.runs} runs per side, alternating (host, python, lightning; "
             "then reversed); images/s = batch / median window step time of a run (first window left out), "
             "the table's figure the median of the runs",
             "- all sides: bf16 autocast, channels-last model and input, cuDNN benchmark, SGD momentum 0.9 lr 0.1 "
             "(no weight decay), synthetic in-memory pool of 256 samples copied from pinned memory each step"]
        if info.get("stopped"):
            first, _, rest = info["stopped"].partition("\n")
            L.append(f"- **incomplete**: {first}")
            if rest:
                L += ["", "```", rest.rstrip(), "```"]
        L.append("")
        for model in a.models:
            m, s = self.shape(model), sums.get(model, {})
            L += [f"## {model}: batch {m['batch']} x 3x{m['size']}x{m['size']}, {m['classes']} classes, "
                  f"{m['steps']} steps (windows of {m['window']}, {m['steps'] - m['window']} timed)", "",
                  "| side | images/s | runs | host / side | peak allocated MiB | peak reserved MiB | notes |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
            host = s.get("host", {}).get("images_per_s")
            for side in SIDES:
                if side not in a.sides:
                    continue
                x = s.get(side, {})
                ips = x.get("images_per_s")
                runs = ", ".join(f"{v:.1f}" for v in x.get("runs_images_per_s", [])) or "-"
                ratio = f"{host / ips:.3f}" if host and ips and side != "host" else "-"
                alloc = f"{x['peak_alloc_mib']:.0f}" if "peak_alloc_mib" in x else "-"
                reserved = f"{x['peak_reserved_mib']:.0f}" if "peak_reserved_mib" in x else "-"
                notes = []
                if side == "host":
                    notes.append(f"memory: max of history `{HOST_MEMORY_KEY}` (allocated; reserved is not logged)")
                    if "data_wait" in x:
                        notes.append(f"data wait {x['data_wait']:.1%}")
                elif side == "python":
                    notes.append("torch.optim.SGD default (foreach); host: fused")
                else:
                    notes.append("Trainer bf16-mixed, foreach SGD")
                if "params" in x:
                    notes.append(f"{x['params']:,} parameters")
                skipped = sum(e["error"].startswith("skipped") for e in x.get("errors", []))
                if len(x.get("errors", [])) > skipped:
                    notes.append(f"**{len(x['errors']) - skipped} failed run(s)**, below")
                if skipped:
                    notes.append(f"{skipped} run(s) skipped (time budget)")
                L.append(f"| {LABELS[side]} | {f'{ips:.1f}' if ips else 'failed' if x else 'not run'} | {runs} | "
                         f"{ratio} | {alloc} | {reserved} | {'; '.join(notes)} |")
            params = {side: x["params"] for side, x in s.items() if "params" in x}
            if len(set(params.values())) > 1:
                L.append(f"\nWARNING: parameter counts differ between sides: {params}")
            L.append("")
            for side in SIDES:
                for e in s.get(side, {}).get("errors", []):
                    cmd = f": `{e['cmd']}`" if "cmd" in e else ""
                    L += [f"{LABELS[side]}, run {e['run']}{cmd}", "", "```", e["error"], "```", ""]
        L.append("## Goals (ResNet-50)")
        L.append("")
        for g in goals:
            verdict = "n/a (missing figures)" if g["met"] is None else \
                f"{g['ratio']:.3f}: **{'met' if g['met'] else 'not met'}**"
            L.append(f"- host >= {g['goal']:.2f}x {LABELS[g['against']]}: {verdict}")
        return "\n".join(L) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, default=ROOT / "build", help="torchhost build (bin/host, plugins/)")
    p.add_argument("--out", type=Path, required=True, help="where gpu-bench.md and gpu-bench.json go")
    p.add_argument("--models", default="resnet50,small_cnn")
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--runs", type=int, default=2, help="runs per side and model")
    p.add_argument("--steps", type=int, default=0, help="steps per run, all models (0: per model)")
    p.add_argument("--window", type=int, default=0, help="steps per timing window (0: per model)")
    p.add_argument("--batch", type=int, default=0, help="batch size, all models (0: per model)")
    p.add_argument("--image-size", type=int, default=0, help="image size, all models (0: per model)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--python", default=sys.executable, help="interpreter of the python and lightning sides")
    p.add_argument("--timeout-s", type=float, default=150, help="per run")
    p.add_argument("--budget-s", type=float, default=200,
                   help="whole benchmark: runs that would start later are skipped (0: no limit)")
    p.add_argument("--keep", action="store_true", help="keep the runs' directories and logs (printed)")
    p.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    a = p.parse_args()
    a.build = a.build.resolve()
    a.out = a.out.resolve()
    a.models = a.models.split(",")
    a.sides = a.sides.split(",")
    unknown = [m for m in a.models if m not in MODELS] + [s for s in a.sides if s not in SIDES]
    if unknown:
        p.error(f"unknown model or side: {', '.join(unknown)}")
    bench = Bench(a)
    for model in a.models:
        m = bench.shape(model)
        if m["steps"] < 2 * m["window"]:
            p.error(f"{model}: {m['steps']} steps do not cover two windows of {m['window']} (the first is left out)")
    if a.keep:
        log(f"runs in {bench.tmp}")
    return bench.main()


if __name__ == "__main__":
    sys.exit(main())
