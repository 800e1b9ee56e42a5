"""bench/train_speed case (c), the Python side: small_cnn trained end to end from the JPEG folder
with torchvision ImageFolder + DataLoader and the transforms of e2e.toml (RandomResizedCrop(64),
RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet statistics)), the same batch, worker
count, intra-op threads and SGD settings as the host run.

    python_e2e.py ROOT [--workers 2] [--batch 32] [--size 64] [--threads 2] [--window 5] [--channels-last]

Runs in .venv-bench (torch 2.14.1 + torchvision 0.29.1: torchvision does not import with the
host's torch 2.13). One epoch; figure = 1 / median step time over windows of --window steps,
the first window (worker start-up, warm-up) left out, as for the host's throughput meter.
--channels-last is the Python spelling of the host's run.channels_last: the model's weights and
each batch in torch.channels_last (the batch is converted on the training thread, one copy).
Output: "python steps_per_s=<x> windows=<n> torch=<version>".
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torchvision import datasets, transforms

import models


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--channels-last", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(a.size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    data = datasets.ImageFolder(a.root, transform=tf)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                         drop_last=True)
    model = models.SmallCnn(len(data.classes)).train()
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    windows = []
    start = time.perf_counter()
    for step, (x, y) in enumerate(loader, 1):
        loss = F.cross_entropy(model(x.contiguous(memory_format=memory_format)), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % a.window == 0:
            now = time.perf_counter()
            windows.append((now - start) / a.window)
            start = now
    timed = windows[1:]
    print(f"python steps_per_s={1 / statistics.median(timed):.4f} windows={len(timed)} torch={torch.__version__}",
          flush=True)


if __name__ == "__main__":
    main()
