"""The Python sides of the GPU end-to-end benchmark (gpu_e2e_bench.py starts each run as its own
process): training from the JPEG folder, and the decode rates.

    gpu_e2e_sides.py train --side tv|nvjpeg --root ROOT --model resnet50 --classes 100 --batch 256
        --size 224 --workers 14 --epochs 2 --window 5 --device cuda [--precision bf16]
    gpu_e2e_sides.py decode --root ROOT --subset 640 [--cpu-batch 64] [--size 224] [--gpu-batch 256]
        [--gpu-images 2048] [--device cuda]

train, the sides (each: models.resnet(depth, classes), the host's ResNet in plain torch.nn; model
and batch channels-last; cuDNN benchmark; bf16 autocast; F.cross_entropy on the fp32 logits;
torch.optim.SGD(lr 0.1, momentum 0.9, fused=True on CUDA); zero_grad(set_to_none=True)):
  tv      torchvision ImageFolder + DataLoader(--workers processes, shuffle, drop_last,
          pin_memory on CUDA, persistent_workers) with the transforms of the host's side:
          RandomResizedCrop(size) (scale 0.08-1, ratio 3/4-4/3; PIL, antialiased),
          RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet statistics): PIL decodes the
          whole JPEG. Each batch is copied to the device on a copy stream one step ahead
          (non_blocking, channels-last), as the host's data.device_prefetch does.
  nvjpeg  the JPEG files' bytes read by DataLoader(--reader-workers processes) and handed over as
          one byte tensor per batch; a decode thread decodes each batch on the GPU with
          torchvision.io.decode_jpeg(list, device="cuda") (nvJPEG, batched), then per image
          RandomResizedCrop.get_params + transforms.v2.functional.resized_crop (antialiased) on
          the float image and a flip with probability 0.5, stacks, normalises the batch and makes
          it channels-last, all on a CUDA stream of its own, --gpu-queue batches ahead of the
          training step, which waits on the batch's event only.
Windows as the host's: the step count is global, a window closes after step s when (s + 1) %
--window == 0 (the loss is read: a device sync), and restarts at each epoch's start (the steps of
an epoch's end that close no window are not timed). Printed per window: "window {json}" (epoch,
steps, step_s, wait_s: the time the training thread waited for batches, per step); at the end
"result {json}". The caller times the windows of the second epoch on.

decode: the decode rates, nothing else running. CPU: torchvision ImageFolder + the same
transforms in ONE DataLoader worker process (batches of --cpu-batch from --subset images spread
over the set), images/s over the batches after the second (the first two: worker start-up).
GPU (CUDA only): --gpu-images of the files' bytes in memory, decoded in batches of --gpu-batch
with decode_jpeg(list, device="cuda"): images/s decode only, then decode + the nvjpeg side's
transforms; with the process's CPU seconds per image while doing it (nvJPEG's Huffman decoding
may run on the CPU). Printed: "result {json}".
"""
import time

T0 = time.monotonic()  # noqa: E402 - before torch's import: the start-up the caller pays

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import models  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def emit(kind, doc):
    print(f"{kind} {json.dumps(doc)}", flush=True)


def versions():
    import torchvision
    return {"torch": torch.__version__, "torchvision": torchvision.__version__}


# ---- the torchvision side's data ----
def tv_transform(size):
    from torchvision import transforms
    return transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


class Prefetcher:
    """Batches from a DataLoader iterator onto the device, one ahead: on CUDA the copy of batch
    i+1 (pinned, non_blocking, channels-last) is issued on a copy stream before step i runs;
    `next()` makes the compute stream wait for its batch's copy only. `wait_s`: the time the
    caller waited on the loader (the host's data wait)."""

    def __init__(self, it, device, memory_format):
        self.it, self.device, self.memory_format = it, device, memory_format
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.wait_s = 0.0
        self.ready = self._issue()

    def _issue(self):
        start = time.perf_counter()
        try:
            x, y = next(self.it)
        except StopIteration:
            return None
        finally:
            self.wait_s += time.perf_counter() - start
        if self.stream is None:
            return x.to(self.device, memory_format=self.memory_format), y.to(self.device)
        with torch.cuda.stream(self.stream):
            return (x.to(self.device, non_blocking=True, memory_format=self.memory_format),
                    y.to(self.device, non_blocking=True))

    def next(self):
        got = self.ready
        if got is None:
            return None
        if self.stream is not None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(self.stream)
            got[0].record_stream(compute)
            got[1].record_stream(compute)
        self.ready = self._issue()
        return got


# ---- the nvjpeg side's data ----
class FileBytes(torch.utils.data.Dataset):
    """(the file's bytes as a uint8 tensor, label) per sample of an ImageFolder listing."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8), label


def collate_bytes(batch):
    """One byte tensor and the offsets per batch: two tensors cross the process boundary, not one
    per image (each would be a shared-memory file descriptor)."""
    sizes = [b[0].numel() for b in batch]
    offsets = torch.zeros(len(batch) + 1, dtype=torch.int64)
    offsets[1:] = torch.tensor(sizes, dtype=torch.int64).cumsum(0)
    return torch.cat([b[0] for b in batch]), offsets, torch.tensor([b[1] for b in batch], dtype=torch.int64)


def split_bytes(blob, offsets):
    o = offsets.tolist()
    return [blob[o[k]:o[k + 1]] for k in range(len(o) - 1)]


def gpu_transform(images, size, mean, std, memory_format):
    """RandomResizedCrop(size) + hflip(0.5) per decoded uint8 CHW image (on its device), then the
    batch stacked, normalised and laid out: torchvision.transforms.v2.functional ops with
    RandomResizedCrop.get_params' random draws, as the CPU pipeline draws them."""
    from torchvision.transforms import RandomResizedCrop
    from torchvision.transforms.v2 import functional as TF
    out = []
    for img in images:
        top, left, h, w = RandomResizedCrop.get_params(img, SCALE, RATIO)
        crop = TF.to_dtype(img[:, top:top + h, left:left + w], torch.float32, scale=True)
        crop = TF.resize(crop, [size, size], antialias=True)
        if torch.rand(1).item() < 0.5:
            crop = TF.horizontal_flip(crop)
        out.append(crop)
    x = torch.stack(out)
    x = TF.normalize(x, mean, std)
    return x.contiguous(memory_format=memory_format)


class GpuDecodeFeed:
    """The nvjpeg side's feed: a thread takes byte batches from the DataLoader iterator, decodes
    and transforms them on its own stream and queues (x, y, event) up to `depth` batches ahead;
    `next()` makes the compute stream wait for the batch's event. A failure in the thread is
    raised by `next()`. `wait_s`: the time the training thread waited for a batch."""

    def __init__(self, it, device, size, memory_format, depth):
        from torchvision.io import ImageReadMode, decode_jpeg
        self.decode = lambda data: decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
        self.it, self.device, self.size, self.memory_format = it, device, size, memory_format
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.cuda else None
        self.mean = torch.tensor(MEAN, device=device).view(3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(3, 1, 1)
        if self.cuda:
            torch.cuda.synchronize(device)  # mean and std are read on the decode stream
        self.q = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.wait_s = 0.0
        self.decode_s = 0.0  # the thread's wall time, decode + transform issued
        self.batches = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.5)
                return True
            except queue.Full:
                pass
        return False

    def _run(self):
        try:
            ctx = torch.cuda.stream(self.stream) if self.cuda else _nullcontext()
            with ctx:
                for blob, offsets, labels in self.it:
                    start = time.perf_counter()
                    if self.cuda:
                        # decode_jpeg allocates its outputs on this stream but writes them on nvJPEG's
                        # own: the previous batch's transforms must be done with the memory it may
                        # reuse. Also keeps this stream at most one batch behind the thread.
                        self.stream.synchronize()
                    y = labels.to(self.device, non_blocking=True)
                    images = self.decode(split_bytes(blob, offsets))
                    x = gpu_transform(images, self.size, self.mean, self.std, self.memory_format)
                    event = None
                    if self.cuda:
                        event = torch.cuda.Event()
                        event.record(self.stream)
                    self.decode_s += time.perf_counter() - start
                    self.batches += 1
                    if not self._put(("batch", x, y, event)):
                        return
            self._put(("end", None, None, None))
        except BaseException:  # noqa: BLE001 - handed to the training thread
            self._put(("error", traceback.format_exc(), None, None))

    def next(self):
        start = time.perf_counter()
        kind, x, y, event = self.q.get()
        self.wait_s += time.perf_counter() - start
        if kind == "end":
            return None
        if kind == "error":
            raise RuntimeError("the decode thread failed:\n" + x)
        if self.cuda:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(event)
            x.record_stream(compute)
            y.record_stream(compute)
        return x, y

    def close(self):
        self.stop.set()


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- train ----
def make_loader(a, device):
    from torchvision import datasets
    cuda = device.type == "cuda"
    if a.side == "tv":
        data = datasets.ImageFolder(a.root, transform=tv_transform(a.size))
        workers, collate = a.workers, None
    else:
        data = FileBytes(datasets.ImageFolder(a.root).samples)
        workers, collate = a.reader_workers, collate_bytes
    kwargs = dict(batch_size=a.batch, shuffle=True, drop_last=True, num_workers=workers,
                  pin_memory=cuda and a.side == "tv", collate_fn=collate,
                  generator=torch.Generator().manual_seed(1))
    if workers > 0:
        kwargs.update(persistent_workers=True, prefetch_factor=a.prefetch_factor)
    return torch.utils.data.DataLoader(data, **kwargs), len(data), workers


def train(a):
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    info = {"side": a.side, "startup_s": round(time.monotonic() - T0, 2), **versions(), "device": str(device)}
    if cuda:
        info["gpu"] = torch.cuda.get_device_name(device)
    loader, samples, workers = make_loader(a, device)
    info.update(samples=samples, loader_workers=workers, batches_per_epoch=len(loader))
    if a.side == "nvjpeg":
        # One file decoded the side's way first: a torchvision without nvJPEG (or a device it
        # cannot use) fails here with its own message, before any model is built.
        from torchvision.io import ImageReadMode, decode_jpeg
        probe = loader.dataset[0][0]
        try:
            decode_jpeg([probe, probe], mode=ImageReadMode.RGB, device=device)
        except Exception as e:
            raise RuntimeError(f"torchvision.io.decode_jpeg([...], device={str(device)!r}) does not work here: "
                               f"{type(e).__name__}: {e}") from e
    memory_format = torch.channels_last
    model = models.resnet(int(a.model.removeprefix("resnet")), a.classes).to(device, memory_format=memory_format)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.0,
                                fused=True if cuda else None)
    info.update(params=params, fused_sgd=cuda, build_s=round(time.monotonic() - T0, 2))
    emit("info", info)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    step = 0
    windows = []
    t_first = None
    decode_s = decode_batches = 0
    for epoch in range(a.epochs):
        window_start = time.perf_counter()
        it = iter(loader)
        feed = (Prefetcher(it, device, memory_format) if a.side == "tv" else
                GpuDecodeFeed(it, device, a.size, memory_format, a.gpu_queue))
        last_wait, in_window = feed.wait_s, 0
        try:
            while True:
                batch = feed.next()
                if batch is None:
                    break
                x, y = batch
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
                    loss = F.cross_entropy(model(x).float(), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                in_window += 1
                if (step + 1) % a.window == 0:
                    value = loss.item()  # the loss read: a device sync, as the host's logging step
                    now = time.perf_counter()
                    w = {"epoch": epoch, "step": step + 1, "steps": in_window,
                         "step_s": (now - window_start) / in_window, "wait_s": (feed.wait_s - last_wait) / in_window,
                         "loss": value}
                    if t_first is None:
                        t_first = time.monotonic() - T0
                    emit("window", w)
                    windows.append(w)
                    window_start, last_wait, in_window = now, feed.wait_s, 0
                step += 1
        finally:
            if a.side == "nvjpeg":
                feed.close()
                decode_s += feed.decode_s
                decode_batches += feed.batches
    sync()
    timed = [w for w in windows if w["epoch"] >= 1] if a.epochs >= 2 else windows[1:]
    if not timed:
        raise RuntimeError(f"no timed window: {len(windows)} windows of {a.window} steps in {a.epochs} epochs")
    step_s = statistics.median(w["step_s"] for w in timed)
    result = {"steps_per_s": 1 / step_s, "images_per_s": a.batch / step_s, "windows": len(timed),
              "data_wait": statistics.median(w["wait_s"] / w["step_s"] for w in timed), "steps": step,
              "first_window_s": round(t_first, 2) if t_first else None, "total_s": round(time.monotonic() - T0, 2)}
    if cuda:
        result["peak_alloc_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if decode_batches:
        result["decode_thread_ms_per_batch"] = round(1000 * decode_s / decode_batches, 2)
    emit("result", result)


# ---- decode rates ----
def spread(samples, n):
    """n samples spread evenly over the listing (the classes and sizes as the whole set)."""
    n = min(n, len(samples))
    return [samples[(k * len(samples)) // n] for k in range(n)]


def decode_rates(a):
    from torchvision import datasets
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    out = {"startup_s": round(time.monotonic() - T0, 2), **versions()}
    listing = datasets.ImageFolder(a.root)
    subset = spread(listing.samples, a.subset)
    # CPU: one DataLoader worker process decoding (PIL) and transforming, as the tv side's workers.
    try:
        data = datasets.ImageFolder(a.root, transform=tv_transform(a.size))
        data.samples = data.imgs = subset
        loader = torch.utils.data.DataLoader(data, batch_size=a.cpu_batch, shuffle=False, num_workers=1,
                                             prefetch_factor=2)
        start, images, times = None, 0, []
        for k, (x, _) in enumerate(loader):
            if k == 1:
                start = time.perf_counter()  # batches 0 and 1: the worker's start-up and first batch
            elif k > 1:
                images += x.shape[0]
                times.append(time.perf_counter())
        if images == 0:
            raise RuntimeError(f"--subset {a.subset} gives fewer than 3 batches of {a.cpu_batch}")
        out["cpu_pil_one_worker"] = {"images_per_s": images / (times[-1] - start), "images": images,
                                     "batch": a.cpu_batch, "what": "ImageFolder (PIL) + RandomResizedCrop + flip + "
                                     "ToTensor + Normalize in 1 DataLoader worker"}
    except Exception as e:  # noqa: BLE001 - the GPU rate below still runs
        out["cpu_pil_one_worker"] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=3)}
    emit("partial", out)
    if not cuda:
        out["gpu_nvjpeg"] = {"error": "not run: CUDA only (decode_jpeg(device='cuda'))"}
        emit("result", out)
        return
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
        files = spread(listing.samples, a.gpu_images)
        blobs = []
        for path, _ in files:
            with open(path, "rb") as f:
                blobs.append(torch.frombuffer(bytearray(f.read()), dtype=torch.uint8))
        batches = [blobs[k:k + a.gpu_batch] for k in range(0, len(blobs), a.gpu_batch)]
        batches = [b for b in batches if len(b) == a.gpu_batch] or batches
        mean = torch.tensor(MEAN, device=device).view(3, 1, 1)
        std = torch.tensor(STD, device=device).view(3, 1, 1)

        def rate(with_transform):
            def one(b):
                images = decode_jpeg(b, mode=ImageReadMode.RGB, device=device)
                if with_transform:
                    gpu_transform(images, a.size, mean, std, torch.channels_last)
            one(batches[0])  # warm-up: nvJPEG's handles and buffers, the transforms' kernels
            torch.cuda.synchronize()
            cpu0, start = time.process_time(), time.perf_counter()
            for b in batches:
                one(b)
            torch.cuda.synchronize()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
            n = sum(len(b) for b in batches)
            return {"images_per_s": n / wall, "images": n, "batch": len(batches[0]),
                    "cpu_ms_per_image": 1000 * cpu / n, "cores_busy": cpu / wall}

        out["gpu_nvjpeg"] = {"decode": rate(False), "decode_transform": rate(True),
                             "what": "torchvision.io.decode_jpeg(list, device='cuda') per batch; then + per-image "
                                     "RandomResizedCrop/flip (v2 functional) + stack + normalise"}
    except Exception as e:  # noqa: BLE001
        out["gpu_nvjpeg"] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=4)}
    emit("result", out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["train", "decode"])
    p.add_argument("--root", required=True)
    p.add_argument("--side", choices=["tv", "nvjpeg"], default="tv")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=max(1, len(os.sched_getaffinity(0)) - 2),
                   help="tv: DataLoader worker processes (default cores - 2)")
    p.add_argument("--reader-workers", type=int, default=4, help="nvjpeg: DataLoader processes reading the files")
    p.add_argument("--prefetch-factor", type=int, default=2, help="DataLoader batches per worker in flight")
    p.add_argument("--gpu-queue", type=int, default=3, help="nvjpeg: batches decoded ahead of the step")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads in the training process (0: default)")
    p.add_argument("--subset", type=int, default=640, help="decode: images for the CPU rate")
    p.add_argument("--cpu-batch", type=int, default=64, help="decode: the CPU rate's batch (image_pipeline_bench's)")
    p.add_argument("--gpu-batch", type=int, default=256, help="decode: images per decode_jpeg call")
    p.add_argument("--gpu-images", type=int, default=2048, help="decode: images for the GPU rate")
    a = p.parse_args()
    try:
        if a.command == "decode":
            decode_rates(a)
        else:
            train(a)
        status = 0
    except BaseException:  # noqa: BLE001 - printed for the caller's table
        traceback.print_exc()
        status = 1
    # No interpreter teardown: the result is out, and DataLoader workers' shutdown or a library's
    # static destructors (nvJPEG's decoder) must not hang or crash the run after it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
