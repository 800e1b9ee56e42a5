"""What the GPU benchmarks' drivers (gpu_bench.py, gpu_e2e_bench.py) share: a plan of runs carried
out one at a time under a time budget, each command in its own session, the report rewritten
after every run, SIGTERM or SIGINT leaving the report as it stands.

PlannedBench runs the plan; a driver subclasses it with its cases, sides, cost model, commands
and tables. Standard library only, like the drivers: the sides (torch, Lightning) run in
subprocesses under another interpreter.
"""
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository: every command runs there


class Stop(Exception):
    """SIGTERM/SIGINT: write what there is and leave."""


def log(msg):
    print(msg, flush=True)  # flushed: the progress lines reach a log read while the bench runs


def tail(text, n=20):
    """The last n lines of a command's output: what a failure's record keeps of it."""
    return "\n".join(text.rstrip().splitlines()[-n:])


def utc_now():
    """The reports' date: now, in UTC, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def gpu_name_and_driver():
    """{"device": name, "driver": version} of the first GPU as nvidia-smi reports it, {} where it
    does not answer. Asked of nvidia-smi so that the driver never creates a CUDA context of its
    own: the sides are to have the device to themselves."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            name, driver = [f.strip() for f in out.stdout.splitlines()[0].split(",")][:2]
            return {"device": name, "driver": driver}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    return {}


class PlannedBench:
    """A benchmark carried out as a plan: (case, run index, side, priority) in the order they
    run. A run starts only if its estimate, scaled by how much longer the runs of its group took
    than theirs so far, fits in what is left of --budget-s; a run that fails is recorded and the
    others go on; REPORT.json and REPORT.md are written before the first run, after every run
    and on the way out (a stop or a bug included), so a timeout leaves the results so far.

    A driver provides: plan(), estimate(case, r, side) in seconds, group(side) (the runs whose
    wall / estimate scale each other's estimates), decide(case, r, side, elapsed) (None to run,
    else why not; over_budget() is the budget's part), run(case, r, side, rec) (fills rec, raises
    RuntimeError with what went wrong), outcome(side, rec) (the progress line of a run that
    worked), probe() (what the report says of the machine), write() (via write_report()) and
    dry_run(plan); after_run() and end_runs() where it keeps processes between runs.
    Expects the driver's arguments `a` to hold out, budget_s, timeout_s, keep and dry_run.
    """

    REPORT = ""  # the report's file names: REPORT.md, REPORT.json
    TITLE = ""  # the report's heading when its table fails
    SCRIPT = ""  # the driver, as a failure of its own is reported

    def __init__(self, a, tmp_prefix):
        self.a = a
        self.t0 = time.monotonic()
        self.tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix))  # the runs' directories and logs
        self.child = None  # the run's process while it runs, for stop()
        self.results = {}  # case -> side -> [run records]
        self.info = {}  # the machine and versions, for the report's head
        self.ratios = {}  # group -> [wall / estimate] of the runs so far

    # ---- the budget ----
    def left(self):
        """Seconds left of --budget-s (infinite without a budget)."""
        return self.a.budget_s - (time.monotonic() - self.t0) if self.a.budget_s > 0 else float("inf")

    def factor(self, side):
        """How much longer than estimated this side's group's runs took so far: the median of
        their wall / estimate, 1 before the first, bounded to 0.5-3 so that one odd run cannot
        shut out, or let in, everything after it."""
        got = self.ratios.get(self.group(side))
        return min(3.0, max(0.5, statistics.median(got))) if got else 1.0

    def over_budget(self, case, r, side, elapsed):
        """Why the run does not fit in what is left of --budget-s after `elapsed` seconds (or
        under 3 s are left), or None (also without a budget)."""
        if self.a.budget_s <= 0:
            return None
        left = self.a.budget_s - elapsed
        need = self.estimate(case, r, side) * self.factor(side)
        if left < 3 or left < need:
            return (f"skipped (budget): ~{need:.0f} s estimated, {max(left, 0):.0f} s of --budget-s "
                    f"{self.a.budget_s:g} left")
        return None

    # ---- the dry run ----
    @staticmethod
    def plan_line(case, r, side, prio, est, why, elapsed, cmd, note=""):
        """The dry run's line for one run: when it would start (elapsed: the estimates of the
        runs before it and its own), or why not; then its command."""
        return (f"# {case} run {r + 1} {side}: priority {prio}, ~{est:.0f} s"
                + (f", {why}" if why else f", starts at ~{elapsed - est:.0f} s") + note + f"\n{cmd}")

    def estimated_line(self, elapsed):
        budget = f" within --budget-s {self.a.budget_s:g}" if self.a.budget_s > 0 else ""
        return f"# estimated: {elapsed:.0f} s of runs{budget}"

    # ---- running ----
    @contextmanager
    def session(self, cmd, out, env, leftovers=False):
        """cmd started in the repository in a session of its own, stdout and stderr to `out`, held
        in self.child while it runs (so that stop() can end it). On the way out, the session is
        killed if the process still runs (a timeout, a stop: its threads and children go with
        it); leftovers=True: also once it has exited, for a child it left behind (a DataLoader
        worker)."""
        self.child = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True, env=env)
        try:
            yield self.child
        finally:
            if self.child.poll() is None:
                os.killpg(self.child.pid, signal.SIGKILL)
                self.child.wait()
            elif leftovers:
                try:
                    os.killpg(self.child.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.child = None

    def stop(self, signum, frame):
        """The SIGTERM/SIGINT handler: end the run in flight, with its session, and unwind to
        main(), which records it and writes the report."""
        if self.child is not None and self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGKILL)
        raise Stop(f"stopped by signal {signum}")

    def run_one(self, case, r, side):
        """One run's record: its estimate, wall time and figures, or its error (a RuntimeError's
        message as it is; anything else is a bug here, with its traceback). A stop goes through."""
        rec = {"run": r + 1, "estimate_s": round(self.estimate(case, r, side), 1)}
        start = time.monotonic()
        try:
            self.run(case, r, side, rec)
            rec["wall_s"] = round(time.monotonic() - start, 1)
            self.ratios.setdefault(self.group(side), []).append(rec["wall_s"] / rec["estimate_s"])
        except Stop:
            raise
        except Exception as e:  # noqa: BLE001 - one side's failure is recorded, the others go on
            rec["wall_s"] = round(time.monotonic() - start, 1)
            rec["error"] = str(e) if isinstance(e, RuntimeError) else \
                f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        return rec

    def after_run(self, plan, i):
        """After plan[i]'s record is stored, before the report is written: nothing by default."""

    def end_runs(self):
        """On the way out, before the last report: nothing by default."""

    def main(self):
        """The plan (printed with --dry-run), each run decided, run and recorded in turn; returns
        the exit status, 1 if stopped or broken (the report written either way)."""
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
            self.write()
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
                    log(f"    {side}: FAILED: {rec['error'].splitlines()[0]}" if "error" in rec else
                        f"    {side}: {self.outcome(side, rec)}")
                self.results.setdefault(case, {}).setdefault(side, []).append(rec)
                self.after_run(plan, i)
                self.write()
        except (Stop, Exception) as e:  # noqa: BLE001 - a bug here must still leave the table
            self.info["stopped"] = str(e) if isinstance(e, Stop) else \
                f"{self.SCRIPT} failed:\n" + traceback.format_exc()
            if current is not None:
                case, r, side = current
                self.results.setdefault(case, {}).setdefault(side, []).append({"run": r + 1, "error": str(e)})
            log(self.info["stopped"])
            status = 1
        finally:
            self.end_runs()
            text = self.write()
            if not a.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
        log("")
        log(text)
        log(f"written: {a.out / (self.REPORT + '.md')}, {a.out / (self.REPORT + '.json')}")
        return status

    # ---- the report ----
    def stopped_lines(self):
        """The report's note of a stop, or of a failure of the driver itself: its first line, the
        rest (a traceback) in a code block; nothing when the plan ran to its end."""
        if not self.info.get("stopped"):
            return []
        first, _, rest = self.info["stopped"].partition("\n")
        return [f"- **incomplete**: {first}"] + (["", "```", rest.rstrip(), "```"] if rest else [])

    def write_report(self, doc, markdown):
        """REPORT.json from doc, then REPORT.md from markdown() (doc as JSON in a code block if the
        table cannot be made: the figures outlive a bug in the table); returns the markdown."""
        a = self.a
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"{self.REPORT}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        try:
            text = markdown()
        except Exception:  # noqa: BLE001 - the raw figures, if the table cannot be made
            text = (f"# {self.TITLE}: the table failed\n\n```\n" + traceback.format_exc() + "```\n\n```json\n"
                    + json.dumps(doc, indent=1, default=str) + "\n```\n")
        (a.out / f"{self.REPORT}.md").write_text(text)
        return text
