"""The GPU benchmark's Python sides in one long-lived process per case (gpu_bench.py starts it):
Python's start-up (8-10 s on the GPU machine) is paid once per case instead of once per run, and
each side keeps what it built (a captured graph, a compiled step) from one run to the next.

    python_sides.py --model resnet50 --classes 1000 --batch 256 --image-size 224 --precision bf16 \\
        --device cuda --steps 40 --window 8 --pool 256 --lr 0.1 --fused --channels-last --cudnn-benchmark

The sides, each with its own model and optimizer built from the same seed (torch.manual_seed(1)),
on the same pinned pool (python_loop.make_batches), every batch copied to the device on a copy
stream one step ahead (python_loop.Prefetcher), bf16 autocast, F.cross_entropy on the fp32 logits,
SGD momentum (fused with --fused), zero_grad(set_to_none=True):
  python         eager: the loop a PyTorch user writes.
  python_graphs  (CUDA only) the whole step (forward, loss, backward, fused SGD step) captured
                 once with torch.cuda.graph, as PyTorch's "whole-network capture" recipe (notes/
                 cuda.rst, "CUDA Graphs") does: static input and target tensors, --graph-warmup
                 eager steps on a side stream first (cuDNN autotuning, the optimizer's momentum
                 buffers), zero_grad(set_to_none=True) before capture (the captured backward
                 allocates the .grad tensors from the graph's pool and refills them in every
                 replay), autocast with cache_enabled=False inside the capture; then each step
                 copies its (prefetched) batch into the static tensors and replays the graph. The
                 counterpart of the host's run.cuda_graphs = "on".
  compiled       torch.compile(mode="reduce-overhead") of forward + loss together
                 (F.cross_entropy(model(x).float(), y) inside the compiled module: Inductor's
                 kernels replayed by cudagraph trees); backward runs the compiled backward, the
                 fused SGD step stays eager (a compiled optimizer step would be another compile).
                 Each step starts with torch.compiler.cudagraph_mark_step_begin().
  compiled_max   the same with mode="max-autotune" (Triton GEMM/convolution templates autotuned
                 against cuBLAS/cuDNN, with CUDA graphs).
A side is built on its first use: the compiled sides compile and run --compile-warmup untimed
steps (compile_s; Inductor's and Triton's caches are TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR,
which gpu_bench.py sets), python_graphs runs its warm-up and captures (capture_s); never inside a
timed window.

Commands on stdin, one per line; each answered by one line "@@ <json>" on stdout (anything else
there is a library talking), with "ok" and, when not ok, "error" and "healthy" (after a failure
the worker checks that the device still runs work, and exits with status 3 if it does not, so
that the caller starts a fresh one):
  run SIDE        build the side if needed, then --steps steps in windows of --window, a device
                  sync closing each: steps_per_s (1 / median window step time, the first window
                  left out), windows, params, on CUDA peak_alloc_mib (the peak allocated during
                  the command, build included, minus what the other sides hold: the memory
                  allocated when the command began less this side's resident bytes) and
                  resident_mib (what the side holds after it), reserved_mib (the process's, all
                  sides); build_s, compile_s or capture_s and the Dynamo counters (graphs,
                  graph_breaks, cudagraph_skips) when it built the side.
  build SIDE      build only (gpu_bench.py --prewarm: compile into the caches).
  profile SIDE N  N more steps under torch.profiler (CUDA activity; one uncounted warm-up step
                  first): {"profile": {"steps": N, "names": {kernel or copy name: [total us,
                  count]}}} for kernel_breakdown.py.
  quit
The first line, before any command, is "@@ {"ready": true, ...}" with torch's version and the
device.
"""
import time

T0 = time.monotonic()  # noqa: E402 - before torch's import: the start-up the caller pays

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import models  # noqa: E402
from python_loop import Prefetcher, device_events, make_batches  # noqa: E402

SIDES = ("python", "python_graphs", "compiled", "compiled_max")
MODES = {"compiled": "reduce-overhead", "compiled_max": "max-autotune"}
MIB = 2**20


class ForwardLoss(nn.Module):
    """Forward and loss, the callable the compiled sides compile."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return F.cross_entropy(self.model(x).float(), y)


class ForwardLossMax(ForwardLoss):
    """The same for max-autotune, with a code object of its own: Dynamo keeps compiled code per
    code object, so the two compiled sides never share a cache entry list (or its recompile
    limit) in one process."""

    def forward(self, x, y):
        return F.cross_entropy(self.model(x).float(), y)


def reply(obj):
    print("@@ " + json.dumps(obj, default=str), flush=True)


def dynamo_counts():
    from torch._dynamo.utils import counters
    return {"graphs": counters["stats"].get("unique_graphs", 0),
            "graph_breaks": sum(counters["graph_break"].values()),
            "cudagraph_skips": counters["inductor"].get("cudagraph_skips", 0)}


class Side:
    """One side: model, optimizer, prefetcher and its step function, built on construction."""

    def __init__(self, name, a, device, batches):
        self.name, self.a, self.device = name, a, device
        self.cuda = device.type == "cuda"
        if name == "python_graphs" and not self.cuda:
            raise RuntimeError("python_graphs needs CUDA (torch.cuda.graph)")
        self.memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
        torch.manual_seed(1)  # every side starts from the same weights
        model = models.build(a.model, a.classes, a.channels, a.image_size).to(device)
        if a.channels_last:
            model = model.to(memory_format=self.memory_format)
        model.train()
        self.model = model
        self.params = sum(t.numel() for t in model.parameters())
        self.optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                                         fused=True if a.fused else None)
        self.prefetch = Prefetcher(batches, device, self.memory_format)
        self.autocast = dict(device_type=device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")
        self.info = {}
        start = time.perf_counter()
        if name == "python":
            self.step = self.eager_step
        elif name in MODES:
            self.compile(MODES[name])
        elif name == "python_graphs":
            self.capture()
        else:
            raise ValueError(f"unknown side {name!r} (of {', '.join(SIDES)})")
        self.info["build_s"] = round(time.perf_counter() - start, 3)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    # ---- python: eager ----
    def eager_step(self):
        x, y = self.prefetch.next()
        with torch.autocast(**self.autocast):
            loss = F.cross_entropy(self.model(x).float(), y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    # ---- compiled, compiled_max: torch.compile of forward + loss ----
    def compile(self, mode):
        module = (ForwardLossMax if mode == "max-autotune" else ForwardLoss)(self.model)
        self.forward_loss = torch.compile(module, mode=mode)
        self.step = self.compiled_step
        before = dynamo_counts()
        # Compilation (Dynamo, AOTAutograd, Inductor, Triton; the backward's in the first
        # backward), then cudagraph trees' warm-up and recording: all untimed.
        self.sync()
        start = time.perf_counter()
        for _ in range(self.a.compile_warmup):
            self.step()
        self.sync()
        self.info["compile_s"] = round(time.perf_counter() - start, 3)
        self.info.update({k: v - before[k] for k, v in dynamo_counts().items()})
        self.info["mode"] = mode

    def compiled_step(self):
        x, y = self.prefetch.next()
        torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(**self.autocast):
            loss = self.forward_loss(x, y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    # ---- python_graphs: the whole step as one CUDA graph ----
    def graph_body(self):
        # Autocast's weight-cast cache must stay off inside a capture (torch.cuda.graph's notes):
        # a cached cast made outside the graph would be read at a stale address in replays.
        with torch.autocast(**self.autocast, cache_enabled=False):
            loss = F.cross_entropy(self.model(self.static_x).float(), self.static_y)
        loss.backward()
        self.optimizer.step()
        return loss

    def load_static(self):
        x, y = self.prefetch.next()  # the current stream waits for the copy stream
        self.static_x.copy_(x)
        self.static_y.copy_(y)

    def capture(self):
        x0, y0 = self.a.batch_shape
        self.static_x = torch.empty(x0, device=self.device).contiguous(memory_format=self.memory_format)
        self.static_y = torch.zeros(y0, dtype=torch.long, device=self.device)
        self.sync()
        start = time.perf_counter()
        # 1. Warm-up on a side stream (the recipe's rule): cuDNN autotuning, cuBLAS workspaces,
        #    the fused SGD's momentum buffers, all outside the graph.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(self.a.graph_warmup):
                self.load_static()
                self.optimizer.zero_grad(set_to_none=True)
                self.graph_body()
        torch.cuda.current_stream(self.device).wait_stream(side)
        # 2. Capture: grads set to None first, so the captured backward allocates them from the
        #    graph's private pool and every replay refills the same .grad tensors.
        self.graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.graph_body()
        self.sync()
        self.info["capture_s"] = round(time.perf_counter() - start, 3)
        self.step = self.graph_step

    def graph_step(self):
        self.load_static()  # copy_ into the static tensors, ordered before the replay on this stream
        self.graph.replay()

    # ---- timing and profiling ----
    def timed(self, steps, window):
        """Per-window mean step seconds, each window closed by a device sync."""
        windows = []
        self.sync()
        start = time.perf_counter()
        for step in range(steps):
            self.step()
            if (step + 1) % window == 0:
                self.sync()
                now = time.perf_counter()
                windows.append((now - start) / window)
                start = now
        return windows

    def profile(self, steps):
        """`steps` steps' device events. One step runs first under the profiler's warm-up (not
        counted): CUPTI's first records of a session can be lost (pytorch/pytorch#192021, CUDA
        12.6u2 to 13.0). A device sync at both edges of the counted window keeps every step's
        kernels inside it."""
        from torch.profiler import ProfilerActivity, profile, schedule
        activities = [ProfilerActivity.CUDA] if self.cuda else [ProfilerActivity.CPU]
        self.sync()
        with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
            for i in range(steps + 1):
                self.step()
                if i in (0, steps):
                    self.sync()
                prof.step()
        return {"steps": steps, "names": device_events(prof) if self.cuda else {}}


class Worker:
    def __init__(self, a, device):
        self.a, self.device = a, device
        self.cuda = device.type == "cuda"
        self.batches = make_batches(a, device)
        a.batch_shape = (tuple(self.batches[0][0].shape), tuple(self.batches[0][1].shape))
        self.sides = {}
        self.resident = {}  # side -> bytes it holds between commands

    def allocated(self):
        return torch.cuda.memory_allocated(self.device) if self.cuda else 0

    def side(self, name):
        if name not in self.sides:
            self.sides[name] = Side(name, self.a, self.device, self.batches)
            return self.sides[name], True
        return self.sides[name], False

    def handle(self, words):
        verb, name = words[0], words[1] if len(words) > 1 else ""
        if name not in SIDES:
            raise ValueError(f"unknown side {name!r} (of {', '.join(SIDES)})")
        out = {"side": name, "verb": verb}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        others = self.allocated() - self.resident.get(name, 0)
        start = time.perf_counter()
        side, built = self.side(name)
        if built:
            out.update(side.info, params=side.params, built=True)
        if verb == "run":
            timed = side.timed(self.a.steps, self.a.window)[1:]
            out.update(steps_per_s=1 / statistics.median(timed), windows=len(timed),
                       window_ms=[round(w * 1000, 4) for w in timed], params=side.params)
        elif verb == "profile":
            out["profile"] = side.profile(int(words[2]) if len(words) > 2 else 3)
        elif verb != "build":
            raise ValueError(f"unknown command {verb!r}")
        out["command_s"] = round(time.perf_counter() - start, 3)
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.resident[name] = self.allocated() - others
            out.update(peak_alloc_mib=(torch.cuda.max_memory_allocated(self.device) - others) / MIB,
                       resident_mib=self.resident[name] / MIB, others_mib=others / MIB,
                       reserved_mib=torch.cuda.memory_reserved(self.device) / MIB)
        out["ok"] = True
        return out

    def drop(self, name):
        """Forget a side that failed (its graph, compiled code and tensors)."""
        self.sides.pop(name, None)
        self.resident.pop(name, None)
        gc.collect()
        if self.cuda:
            try:
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001 - the health check below decides
                pass

    def healthy(self):
        """Whether the device still runs work after a failure (a sticky CUDA error, an
        invalidated capture left behind, would fail every later side)."""
        if not self.cuda:
            return True
        try:
            torch.cuda.synchronize(self.device)
            return float((torch.ones(8, device=self.device) * 2).sum().item()) == 16.0
        except Exception:  # noqa: BLE001
            return False


def die_with_parent():
    """Linux: SIGKILL this worker when the process that started it dies. The worker runs in a
    session of its own (so that gpu_bench.py can end it with its compile subprocesses), which a
    kill of the caller's process group does not reach; without this a killed gpu_bench.py would
    leave it compiling on the GPU machine beside the next timed run."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the prctl
        os._exit(1)


def main() -> int:
    die_with_parent()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--pool", type=int, default=256)
    p.add_argument("--data", default="", help="tensor pool file (make_tensors.py); empty: seeded random pool")
    p.add_argument("--device", default="cuda")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--fused", action="store_true", help="torch.optim.SGD(fused=True): the host's kernel")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    p.add_argument("--compile-warmup", type=int, default=3, help="untimed steps of a compiled side's build")
    p.add_argument("--graph-warmup", type=int, default=3, help="eager steps on a side stream before the capture")
    a = p.parse_args()
    if a.steps < 2 * a.window:
        p.error("--steps must cover at least two windows (the first is left out)")
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    device = torch.device(a.device)
    worker = Worker(a, device)
    reply({"ready": True, "torch": torch.__version__, "startup_s": round(time.monotonic() - T0, 3),
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else a.device})
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            reply(worker.handle(words))
        except Exception as e:  # noqa: BLE001 - one side's failure is reported, the others go on
            name = words[1] if len(words) > 1 else ""
            worker.drop(name)
            healthy = worker.healthy()
            text = "".join(traceback.format_exception(e))
            print(text, file=sys.stderr, flush=True)
            reply({"side": name, "verb": words[0], "ok": False, "healthy": healthy,
                   "error": f"{type(e).__name__}: {e}", "traceback": text[-4000:]})
            if not healthy:
                return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
