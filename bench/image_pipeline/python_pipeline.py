"""The Python side of bench/image_pipeline: torchvision ImageFolder + DataLoader with the transforms
of the host's image_folder run (loader_bench.cpp): RandomResizedCrop(size) with torchvision's
default scale and ratio, RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet statistics).

    python_pipeline.py ROOT [--workers 2] [--batch 64] [--size 224] [--epochs 2]

Runs in .venv-bench (scripts/bench_setup): torch 2.14.1 + torchvision 0.29.1, PIL decoding.
persistent_workers=True (when workers > 0), so worker processes start once, as the host's
threads are cheap to start; epoch 0 warms up, each later epoch is timed from iter() to its last
batch. Output: "python images_per_s=<median over the timed epochs> epochs=<n> torch=... torchvision=...".
"""
import argparse
import statistics
import time

import torch
import torchvision
from torchvision import datasets, transforms


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--augment", action="store_true",
                   help="add RandAugment(2, 9) after the flip and RandomErasing(0.25) after Normalize (the recipe)")
    a = p.parse_args()
    augment = [transforms.RandAugment(num_ops=2, magnitude=9)] if a.augment else []
    erase = [transforms.RandomErasing(p=0.25)] if a.augment else []
    tf = transforms.Compose([
        transforms.RandomResizedCrop(a.size),
        transforms.RandomHorizontalFlip(),
        *augment,
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        *erase,
    ])
    data = datasets.ImageFolder(a.root, transform=tf)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                         persistent_workers=a.workers > 0)
    rates = []
    for epoch in range(a.epochs + 1):
        start = time.perf_counter()
        images = sum(x.shape[0] for x, _ in loader)
        if epoch > 0:
            rates.append(images / (time.perf_counter() - start))
    print(f"python images_per_s={statistics.median(rates):.2f} epochs={len(rates)} torch={torch.__version__} "
          f"torchvision={torchvision.__version__}", flush=True)


if __name__ == "__main__":
    main()
