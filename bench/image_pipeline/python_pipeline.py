"""The Python side of bench/image_pipeline: torchvision ImageFolder + DataLoader with the transforms
of the host's image_folder run (loader_bench.cpp): RandomResizedCrop(size) with torchvision's
default scale and ratio, RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet statistics).

    python_pipeline.py ROOT [--workers 2] [--batch 64] [--size 224] [--epochs 2] [--shards PATTERN]

With --shards (ROOT is then ignored): the same transforms over WebDataset tar shards, as the
webdataset package's documentation writes it: webdataset.WebDataset(PATTERN, shardshuffle=<the
number of shards>) (each DataLoader worker reads its own shards, webdataset's split_by_worker),
.shuffle(--shuffle-buffer) on the undecoded samples, .decode("pil") (PIL, RGB, as ImageFolder
loads), the transforms, and DataLoader(batch_size, num_workers) over that IterableDataset
(batches are formed in each worker; a worker's last batch may be short).

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
    p.add_argument("--shards", help="a brace pattern of WebDataset shards (jpg + cls) instead of ROOT")
    p.add_argument("--shuffle-buffer", type=int, default=800,
                   help="--shards: samples in webdataset's shuffle buffer (800: the host's default group window, "
                        "4 shards of 200)")
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
    if a.shards:
        import braceexpand
        import webdataset as wds

        urls = list(braceexpand.braceexpand(a.shards))
        data = (wds.WebDataset(urls, shardshuffle=len(urls)).shuffle(a.shuffle_buffer).decode("pil")
                .to_tuple("jpg;jpeg;png", "cls").map_tuple(tf, int))
        loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers,
                                             persistent_workers=a.workers > 0)
    else:
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
