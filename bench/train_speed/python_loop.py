"""The Python eager side of bench/train_speed: the loop a PyTorch user writes, on the same tensors,
architecture, optimizer settings, precision and intra-op thread count as the host run it is
compared with.

    python_loop.py --model small_cnn --data POOL --batch 64 --image-size 64 --precision bf16 ...

Batches: --data POOL (make_tensors.py) is cut into whole batches once, before timing, and cycled
in order, as bare_loop.cpp does; without --data a seeded random pool of --pool samples is used
(the GPU benchmark). On CUDA every batch is copied from pinned memory with non_blocking=True each
step, which is what the host's loader does.

Output: "python steps_per_s=<1/median window step time> windows=<n> params=<n> torch=<version>",
on CUDA followed by "peak_alloc_mib=<n> peak_reserved_mib=<n>"; the first window is warm-up and is
left out.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import make_tensors
import models


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
    a = p.parse_args()
    torch.backends.cudnn.benchmark = a.cudnn_benchmark

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    device = torch.device(a.device)
    if a.data:
        images, labels = make_tensors.read_pool(a.data, a.channels, a.image_size)
    else:
        g = torch.Generator().manual_seed(1)
        images = torch.rand(a.pool, a.channels, a.image_size, a.image_size, generator=g) * 2 - 1
        labels = torch.randint(0, a.classes, (a.pool,), generator=g)
    pin = device.type == "cuda"
    batches = [(images[b:b + a.batch].clone(), labels[b:b + a.batch].clone())
               for b in range(0, images.shape[0] - a.batch + 1, a.batch)]
    if pin:
        batches = [(x.pin_memory(), y.pin_memory()) for x, y in batches]

    model = models.build(a.model, a.classes, a.channels).to(device)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    if a.channels_last:
        model = model.to(memory_format=memory_format)
    model.train()
    params = sum(t.numel() for t in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, fused=True if a.fused else None)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    windows = []
    sync()
    start = time.perf_counter()
    for step in range(a.steps):
        x, y = batches[step % len(batches)]
        x = x.to(device, non_blocking=True, memory_format=memory_format)
        y = y.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = F.cross_entropy(model(x).float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % a.window == 0:
            sync()
            now = time.perf_counter()
            windows.append((now - start) / a.window)
            start = now
    timed = windows[1:]
    line = (f"python steps_per_s={1 / statistics.median(timed):.4f} windows={len(timed)} params={params} "
            f"torch={torch.__version__}")
    if device.type == "cuda":  # the caching allocator's peaks since start-up (gpu_bench.py's memory columns)
        line += (f" peak_alloc_mib={torch.cuda.max_memory_allocated() / 2**20:.1f}"
                 f" peak_reserved_mib={torch.cuda.max_memory_reserved() / 2**20:.1f}")
    print(line, flush=True)


if __name__ == "__main__":
    main()
