"""Writes the tensor pool every train_speed loop reads: host (tensor_pool dataset), bare C++ loop
and Python loop train on exactly these samples.

    make_tensors.py OUT COUNT CHANNELS SIZE NUM_CLASSES [SEED]

Layout (what tensor_pool_dataset.c and bare_loop.cpp read): COUNT float32 images
[CHANNELS, SIZE, SIZE] uniform in [-1, 1), then COUNT int64 labels in [0, NUM_CLASSES), C order,
native byte order, no header. Needs only torch (either venv).
"""
import os
import sys

import torch


def main() -> None:
    out, count, channels, size, classes = sys.argv[1], *map(int, sys.argv[2:6])
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(count, channels, size, size, generator=g) * 2 - 1
    labels = torch.randint(0, classes, (count,), generator=g, dtype=torch.int64)
    with open(out, "wb") as f:
        f.write(images.numpy().tobytes())
        f.write(labels.numpy().tobytes())


def read_pool(path: str, channels: int, size: int):
    """The pool as (images [N, C, S, S] float32, labels [N] int64)."""
    raw = torch.from_file(path, shared=False, size=os.path.getsize(path), dtype=torch.uint8)
    per_sample = channels * size * size * 4 + 8
    n = raw.numel() // per_sample
    images = raw[: n * (per_sample - 8)].view(torch.float32).view(n, channels, size, size)
    labels = raw[n * (per_sample - 8):].view(torch.int64)
    return images.clone(), labels.clone()


if __name__ == "__main__":
    main()
