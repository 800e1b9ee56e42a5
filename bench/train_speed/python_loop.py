"""The Python eager side of bench/train_speed: the loop a PyTorch user writes, on the same tensors,
architecture, optimizer settings, precision and intra-op thread count as the host run it is
compared with.

    python_loop.py --model small_cnn --data POOL --batch 64 --image-size 64 --precision bf16 ...

Batches: --data POOL (make_tensors.py) is cut into whole batches once, before timing, and cycled
in order, as bare_loop.cpp does; without --data a seeded random pool of --pool samples is used
(the GPU benchmark). On CUDA every batch is copied from pinned memory with non_blocking=True on a
copy stream one step ahead (Prefetcher), as the host's loader does (data.device_prefetch): the
copy of batch i+1 overlaps step i, and the step waits for its batch's copy only.

--compile MODE compiles forward and loss together, torch.compile(F.cross_entropy(model(x).float(),
y), mode=MODE); backward and the fused optimizer step stay eager. --compile-warmup steps (3:
compile, then cudagraph trees' warm-up and recording) run before the timed loop; their time is
reported as compile_s and is not in any window. Each step starts with
torch.compiler.cudagraph_mark_step_begin(), as the cudagraph trees documentation asks of a
training loop. The GPU benchmark runs these sides in python_sides.py, which reuses the pieces here.

--profile-steps N (CUDA): after the timed loop, N more steps under torch.profiler (CUDA activity
only); the device time of their kernels, and separately of their memcpy/memset, per step: the
GPU benchmark's kernel-time ceiling (batch / kernel time).

Output: "<label> steps_per_s=<1/median window step time> windows=<n> params=<n> torch=<version>"
(label: --label, default "python", or "compiled" with --compile), on CUDA followed by
"peak_alloc_mib=<n> peak_reserved_mib=<n>", with --compile by "compile_s=<s> graphs=<n>
graph_breaks=<n> cudagraph_skips=<n>", with --profile-steps by "kernel_ms=<ms per step>
copy_ms=<ms per step> kernels_per_step=<n>"; the first window is warm-up and is left out.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import make_tensors
import models


def make_batches(a, device):
    """The pool (--data or a seeded random pool) cut into whole batches, pinned on CUDA."""
    if a.data:
        images, labels = make_tensors.read_pool(a.data, a.channels, a.image_size)
    else:
        g = torch.Generator().manual_seed(1)
        images = torch.rand(a.pool, a.channels, a.image_size, a.image_size, generator=g) * 2 - 1
        labels = torch.randint(0, a.classes, (a.pool,), generator=g)
    batches = [(images[b:b + a.batch].clone(), labels[b:b + a.batch].clone())
               for b in range(0, images.shape[0] - a.batch + 1, a.batch)]
    if device.type == "cuda":
        batches = [(x.pin_memory(), y.pin_memory()) for x, y in batches]
    return batches


class Prefetcher:
    """Cycles the batches onto the device. On CUDA the host-to-device copy (pinned memory,
    non_blocking) of the next batch is issued on a dedicated copy stream one step ahead, so it
    overlaps the current step: `next()` makes the current (compute) stream wait for that copy
    only, marks the batch as used on the compute stream (record_stream: the caching allocator
    must not hand its memory back to the copy stream before the step is done with it) and issues
    the following copy. Elsewhere a plain `.to()`."""

    def __init__(self, batches, device, memory_format=torch.contiguous_format):
        self.batches, self.device, self.memory_format = batches, device, memory_format
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.i = 0
        self.ready = None
        self._issue()

    def _issue(self):
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        if self.stream is None:
            self.ready = (x.to(self.device, memory_format=self.memory_format), y.to(self.device))
            return
        # The copy stream waits for nothing: its sources are pinned host tensors nobody writes,
        # and its destinations are fresh allocations made on it.
        with torch.cuda.stream(self.stream):
            self.ready = (x.to(self.device, non_blocking=True, memory_format=self.memory_format),
                          y.to(self.device, non_blocking=True))

    def next(self):
        x, y = self.ready
        if self.stream is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(self.stream)
            x.record_stream(compute)
            y.record_stream(compute)
        self._issue()
        return x, y


def device_events(prof):
    """{name: [total us, count]} of a torch.profiler run's device events (kernels, memcpy,
    memset), user annotations and "Context Sync" left out (as torch._inductor's
    do_bench_using_profiling does). Works on the kineto events, which torch 2.x all expose."""
    from torch.autograd import DeviceType
    names = {}
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != DeviceType.CUDA:
            continue
        if getattr(e, "is_user_annotation", lambda: False)() or \
                getattr(e, "activity_type", lambda: "")() == "gpu_user_annotation":
            continue
        name = e.name()
        if name == "Context Sync":
            continue
        ns = e.duration_ns() if hasattr(e, "duration_ns") else e.end_ns() - e.start_ns()
        got = names.setdefault(name, [0.0, 0])
        got[0] += ns / 1000
        got[1] += 1
    return names


def device_time_per_step(prof, steps):
    """(kernel ms, memcpy/memset ms, kernels) per step from a profiler run on CUDA."""
    kernel_us = copy_us = kernels = 0
    for name, (us, count) in device_events(prof).items():
        if name.startswith(("Memcpy", "Memset")):
            copy_us += us
        else:
            kernel_us += us
            kernels += count
    return kernel_us / 1e3 / steps, copy_us / 1e3 / steps, kernels / steps


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave the default)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--data", default="", help="tensor pool file; empty: random pool")
    p.add_argument("--pool", type=int, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--fused", action="store_true", help="torch.optim.SGD(fused=True): the host's kernel")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    p.add_argument("--compile", default="", help="torch.compile mode for the model (\"reduce-overhead\"); empty: eager")
    p.add_argument("--compile-warmup", type=int, default=3, help="untimed steps after compiling (compile_s)")
    p.add_argument("--profile-steps", type=int, default=0, help="CUDA: profiled steps after the timed loop")
    p.add_argument("--label", default="", help="the output line's first word (default python, or compiled)")
    a = p.parse_args()
    label = a.label or ("compiled" if a.compile else "python")
    if a.steps < 2 * a.window:
        p.error("--steps must cover at least two windows (the first is left out)")
    torch.backends.cudnn.benchmark = a.cudnn_benchmark

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    device = torch.device(a.device)
    batches = make_batches(a, device)

    model = models.build(a.model, a.classes, a.channels, a.image_size).to(device)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    if a.channels_last:
        model = model.to(memory_format=memory_format)
    model.train()
    params = sum(t.numel() for t in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, fused=True if a.fused else None)

    def forward_loss(x, y):
        return F.cross_entropy(model(x).float(), y)

    forward_loss = torch.compile(forward_loss, mode=a.compile) if a.compile else forward_loss
    mark_step = torch.compiler.cudagraph_mark_step_begin if a.compile else (lambda: None)
    prefetch = Prefetcher(batches, device, memory_format)

    def train_step(step):
        x, y = prefetch.next()
        mark_step()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = forward_loss(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    extra = ""
    if a.compile:
        # Compilation (Dynamo, AOTAutograd, Inductor, Triton) happens in the first steps, the
        # backward's in the first backward; cudagraph trees warm up, then record: all untimed.
        sync()
        start = time.perf_counter()
        for step in range(a.compile_warmup):
            train_step(step)
        sync()
        from torch._dynamo.utils import counters
        extra = (f" compile_s={time.perf_counter() - start:.2f}"
                 f" graphs={counters['stats'].get('unique_graphs', 0)}"
                 f" graph_breaks={sum(counters['graph_break'].values())}"
                 f" cudagraph_skips={counters['inductor'].get('cudagraph_skips', 0)}")
    windows = []
    sync()
    start = time.perf_counter()
    for step in range(a.steps):
        train_step(step)
        if (step + 1) % a.window == 0:
            sync()
            now = time.perf_counter()
            windows.append((now - start) / a.window)
            start = now
    timed = windows[1:]
    line = (f"{label} steps_per_s={1 / statistics.median(timed):.4f} windows={len(timed)} params={params} "
            f"torch={torch.__version__}")
    if device.type == "cuda":  # the caching allocator's peaks since start-up (gpu_bench.py's memory columns)
        line += (f" peak_alloc_mib={torch.cuda.max_memory_allocated() / 2**20:.1f}"
                 f" peak_reserved_mib={torch.cuda.max_memory_reserved() / 2**20:.1f}")
    line += extra
    print(line, flush=True)  # printed before profiling: a failing profiler keeps the figure
    if a.profile_steps > 0 and device.type == "cuda":
        try:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for step in range(a.profile_steps):
                    train_step(step)
                sync()
            kernel_ms, copy_ms, kernels = device_time_per_step(prof, a.profile_steps)
            print(f"{label} profile kernel_ms={kernel_ms:.4f} copy_ms={copy_ms:.4f} kernels_per_step={kernels:.1f} "
                  f"profiled_steps={a.profile_steps}", flush=True)
        except Exception as e:  # noqa: BLE001 - the timed figure above stands without the ceiling
            print(f"{label} profile failed: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
