"""Writes the benchmark's JPEG folder: ROOT/class_XX/img_NNNNN.jpg.

    make_images.py ROOT [--count 2000] [--classes 10] [--size 256] [--quality 90]

Each image is a random 8x8 colour field upsampled bicubically to SIZE x SIZE plus mild noise, so it
compresses like a photograph (about 15-25 KB at quality 90), not like flat colour (too easy to
decode) or white noise (too hard). Seeded: the same arguments give the same files. Needs numpy and
Pillow (.venv-bench from scripts/bench_setup has both). Skips the work when ROOT already holds
COUNT images.
"""
import argparse
from pathlib import Path

import numpy as np
from PIL import Image


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("root", type=Path)
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--quality", type=int, default=90)
    a = p.parse_args()
    if len(list(a.root.glob("class_*/*.jpg"))) == a.count:
        return
    rng = np.random.default_rng(1)
    for i in range(a.count):
        folder = a.root / f"class_{i % a.classes:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        field = Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).resize((a.size, a.size), Image.BICUBIC)
        pixels = np.asarray(field, dtype=np.int16) + rng.integers(-12, 13, (a.size, a.size, 3))
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"img_{i:05d}.jpg", quality=a.quality)


if __name__ == "__main__":
    main()
