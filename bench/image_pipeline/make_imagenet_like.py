"""Writes an ImageNet-like JPEG set, generated here (no download), as a torchvision ImageFolder tree
and the same bytes as WebDataset tar shards:

    ROOT/class_XXX/img_NNNNN.jpg            (image i in class i % classes)
    ROOT-shards/train-{000000..NNNNNN}.tar  (<key>.jpg + <key>.cls, key img_NNNNN; a seeded
                                             shuffled order, so every shard mixes the classes)

    make_imagenet_like.py ROOT [--count 8000] [--classes 100] [--workers N] [--shards-per 500]
                          [--quality 90] [--seed 1] [--no-shards] [--measure-decode N]

ImageNet-like in what a loader pays for:
- image sizes drawn like ImageNet's train set: mostly 500x375, 375x500 and 500x333 (landscape and
  portrait), some 333x500, 500x500, 500x281, the rest a spread of sizes (long side log-normal
  around 310 px, 80-1600 px, aspect 4:3, 3:2, 1:1, 16:9 or 5:4, 72% landscape): about 400x340 on
  average, 6% with a side over 500;
- file sizes like ImageNet's, about 110 KB on average, at quality 90 (4:2:0, PIL's default):
  the content is a low-frequency colour field with a few flat shapes (edges), plus a
  multi-octave luminance and chroma texture whose strength varies across the image and from image
  to image (log-normal), so files spread from about 18 to 190 KB (5-95%) and the entropy decoding
  costs what a photograph's does (the same bits per pixel). The texture comes from a bank of two
  1024x1024 textures made once per process from the seed (a window of it per image, sometimes
  transposed), which keeps generation at ~6 CPU ms per image (2-core VM: 8000 images in 24 s with
  2 workers).

Seeded and deterministic: image i is drawn from its own generator (seed, i), so the same arguments
give the same pixels with any --workers (the bytes depend on the machine's libjpeg). Parallel over
--workers processes (default: all cores). Skips the work when ROOT (and ROOT-shards) already hold
this set (ROOT/imagenet_like.json records the arguments and the statistics); a ROOT that holds
other files is refused. The shards are written with Python's tarfile (ustar; mode 0644, owner 0,
a fixed time), each under a temporary name and renamed. Needs numpy and Pillow.

--measure-decode N: afterwards, time decoding N of the files one by one with PIL
(Image.open + convert("RGB")), OpenCV (cv2.imdecode, if importable) and torchvision
(torchvision.io.decode_jpeg on the CPU, if importable), one thread, from memory.
"""
import argparse
import io
import json
import multiprocessing
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

MARKER = "imagenet_like.json"
VERSION = 1  # bump when the content or the layout changes: a set made by another version is remade
BANK = 1024  # texture bank side; images with a side over it tile the bank
# Common ImageNet train sizes (width, height) and their shares; draw_size() spreads the rest.
COMMON = (((500, 375), 0.30), ((375, 500), 0.08), ((500, 333), 0.08), ((333, 500), 0.03), ((500, 500), 0.03),
          ((500, 281), 0.02))
ASPECTS = ((4, 3, 0.45), (3, 2, 0.25), (1, 1, 0.12), (16, 9, 0.08), (5, 4, 0.10))
# Texture strength (grey levels, standard deviation of the luminance texture before the spatial
# mask): calibrated so that the mean file is ~110 KB at quality 90 (bench/README.md).
DETAIL = 55.0
DETAIL_SPREAD = 0.45  # log-normal sigma of the per-image strength
OCTAVE_SLOPE = -0.5  # octave weights: cell size ** slope (finer octaves stronger, as JPEG at quality 90 keeps them)
CHROMA = 0.5  # chroma texture, relative to the luminance texture
TAR_MTIME = 1700000000  # fixed member time: the same set gives the same shards

_bank = None  # per process: (luminance, second texture), float32 BANK x BANK, unit variance


def make_bank(seed):
    rng = np.random.default_rng([seed, 0xBA4C])
    out = []
    for _ in range(2):
        tex = np.zeros((BANK, BANK), np.float32)
        for cell in (32, 16, 8, 4, 2, 1):  # octaves from 32-pixel cells to single pixels
            g = rng.standard_normal((BANK // cell, BANK // cell), dtype=np.float32)
            if cell > 1:
                g = np.asarray(Image.fromarray(g, "F").resize((BANK, BANK), Image.BICUBIC))
            tex += g * cell ** OCTAVE_SLOPE
        out.append(tex / tex.std())
    return out


def init_worker(seed):
    global _bank
    _bank = make_bank(seed)


def draw_size(rng):
    u, acc = rng.random(), 0.0
    for size, share in COMMON:
        acc += share
        if u < acc:
            return size
    long_side = int(np.clip(rng.lognormal(np.log(310), 0.45), 80, 1600))
    a = ASPECTS[rng.choice(len(ASPECTS), p=[x[2] for x in ASPECTS])]
    short = max(48, round(long_side * a[1] / a[0]))
    return (long_side, short) if rng.random() < 0.72 else (short, long_side)


def window(tex, rng, w, h):
    """An h x w window of a bank texture at a random offset, sometimes transposed; tiled when
    the image is larger than the bank."""
    if rng.random() < 0.5:
        tex = tex.T
    if h > BANK or w > BANK:
        tex = np.tile(tex, (-(-h // BANK) + 1, -(-w // BANK) + 1))
    oy = int(rng.integers(0, tex.shape[0] - h + 1))
    ox = int(rng.integers(0, tex.shape[1] - w + 1))
    return tex[oy:oy + h, ox:ox + w]


def render(rng, w, h):
    # 1. A low-frequency colour field around one mean colour (photographs are not saturated).
    cells = int(rng.integers(2, 6))
    mean = rng.uniform(40, 210, 3)
    base = np.clip(mean + rng.normal(0, 45, (cells, cells, 3)), 0, 255).astype(np.uint8)
    img = Image.fromarray(base).resize((w, h), Image.BICUBIC)
    # 2. A few flat shapes: edges, as objects give.
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 10))):
        x0, y0 = rng.uniform(-0.2, 1.0) * w, rng.uniform(-0.2, 1.0) * h
        x1, y1 = x0 + rng.uniform(0.05, 0.6) * w, y0 + rng.uniform(0.05, 0.6) * h
        colour = tuple(int(v) for v in np.clip(mean + rng.normal(0, 60, 3), 0, 255))
        if rng.random() < 0.5:
            draw.ellipse([x0, y0, x1, y1], fill=colour)
        else:
            points = [(float(rng.uniform(x0, x1)), float(rng.uniform(y0, y1))) for _ in range(int(rng.integers(3, 7)))]
            draw.polygon(points, fill=colour)
    # 3. Texture: luminance and chroma, stronger in some regions than others (grass next to sky).
    x = np.asarray(img, dtype=np.float32)
    detail = DETAIL * float(np.exp(rng.normal(0, DETAIL_SPREAD)))
    m = rng.uniform(0.15, 1.6, (3, 3)).astype(np.float32)
    mask = np.asarray(Image.fromarray(m, "F").resize((w, h), Image.BICUBIC)) * detail
    k = int(rng.integers(2))
    x += (window(_bank[k], rng, w, h) * mask)[..., None]
    chroma = window(_bank[1 - k], rng, w, h) * mask * CHROMA
    x[..., 0] += chroma
    x[..., 2] -= chroma
    return Image.fromarray(np.clip(x, 0, 255).astype(np.uint8))


def layout(a):
    """Folder and file name widths, and each image's path relative to ROOT."""
    cw, iw = max(3, len(str(a.classes - 1))), max(5, len(str(a.count - 1)))
    return lambda i: f"class_{i % a.classes:0{cw}d}/img_{i:0{iw}d}.jpg"


def make_images(job):
    """Images [lo, hi): (index, bytes, width, height) each, and the CPU seconds they took."""
    start = time.process_time()
    root, lo, hi, seed, quality, classes, count = job
    a = argparse.Namespace(classes=classes, count=count)
    name = layout(a)
    out = []
    for i in range(lo, hi):
        rng = np.random.default_rng([seed, i])
        w, h = draw_size(rng)
        buf = io.BytesIO()
        render(rng, w, h).save(buf, "JPEG", quality=quality)
        path = Path(root) / name(i)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, path)
        out.append((i, buf.tell(), w, h))
    return out, time.process_time() - start


def write_shard(job):
    """One shard: its samples' members in order, ustar, deterministic headers."""
    root, out_dir, shard, indices, classes, count = job
    name = layout(argparse.Namespace(classes=classes, count=count))
    path = Path(out_dir) / f"train-{shard:06d}.tar"
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in indices:
            rel = name(i)
            key = Path(rel).stem  # img_NNNNN: no dot, as webdataset keys must be
            for ext, data in (("jpg", (Path(root) / rel).read_bytes()), ("cls", str(i % classes).encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mtime, info.mode = len(data), TAR_MTIME, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
    return path.stat().st_size


def ours(folder, allowed):
    """True when `folder` is missing, empty, or holds only what this script writes."""
    if not folder.exists():
        return True
    return all(allowed(p) for p in folder.iterdir())


def measure_decode(a, name, n):
    """ms per image of decoding n files one by one from memory, one thread, per library."""
    files = [(Path(a.root) / name(i)).read_bytes() for i in range(0, a.count, max(1, a.count // n))][:n]
    pixels = sum(Image.open(io.BytesIO(b)).size[0] * Image.open(io.BytesIO(b)).size[1] for b in files)
    results = {}

    def timed(label, decode):
        decode(files[0])  # warm-up: libraries, tables
        t = time.perf_counter()
        for b in files:
            decode(b)
        s = time.perf_counter() - t
        results[label] = {"ms_per_image": round(1000 * s / len(files), 3), "mpix_per_s": round(pixels / s / 1e6, 1)}

    timed("pil", lambda b: Image.open(io.BytesIO(b)).convert("RGB").load())
    try:
        import cv2
        cv2.setNumThreads(1)
        timed(f"opencv {cv2.__version__}", lambda b: cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR))
    except ImportError as e:
        results["opencv"] = f"not importable ({e})"
    try:
        import torch
        import torchvision.io
        torch.set_num_threads(1)
        timed("torchvision.io.decode_jpeg (cpu)",
              lambda b: torchvision.io.decode_jpeg(torch.frombuffer(bytearray(b), dtype=torch.uint8)))
    except ImportError as e:
        results["torchvision"] = f"not importable ({e})"
    return {"files": len(files), "mean_pixels": round(pixels / len(files)), **results}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", type=Path)
    p.add_argument("--count", type=int, default=8000)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--shards-per", type=int, default=500, help="samples per shard")
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-shards", action="store_true", help="the folder only")
    p.add_argument("--measure-decode", type=int, default=0, metavar="N", help="time decoding N files afterwards")
    a = p.parse_args()
    if a.count < 1 or a.classes < 1 or a.shards_per < 1 or a.workers < 1:
        p.error("--count, --classes, --shards-per and --workers must be >= 1")
    a.root = a.root.resolve()
    shards = Path(str(a.root) + "-shards")
    params = {"version": VERSION, "count": a.count, "classes": a.classes, "quality": a.quality, "seed": a.seed,
              "shards_per": None if a.no_shards else a.shards_per,
              "content": [DETAIL, DETAIL_SPREAD, OCTAVE_SLOPE, CHROMA, BANK]}
    name = layout(a)
    marker = a.root / MARKER
    t0 = time.monotonic()
    try:
        done = json.loads(marker.read_text())
    except (OSError, ValueError):
        done = {}
    n_shards = 0 if a.no_shards else -(-a.count // a.shards_per)
    shard_files = [shards / f"train-{j:06d}.tar" for j in range(n_shards)]
    skipped = done.get("params") == params and all(p_.exists() for p_ in shard_files)
    if skipped:
        stats = done["stats"]
        print(f"make_imagenet_like: {a.root} already holds this set (skipped)")
    else:
        for folder, allowed in ((a.root, lambda q: q.name == MARKER or (q.is_dir() and q.name.startswith("class_"))),
                                (shards, lambda q: q.name.startswith("train-") and q.suffix in (".tar", ".tmp"))):
            if not ours(folder, allowed):
                sys.exit(f"make_imagenet_like: {folder} holds files this script did not write; "
                         "name an empty or missing folder")
        marker.unlink(missing_ok=True)
        for d in list(a.root.glob("class_*")) + ([shards] if shards.exists() else []):
            shutil.rmtree(d)
        for c in range(a.classes):
            (a.root / Path(name(c)).parent).mkdir(parents=True, exist_ok=True)
        chunk = max(1, min(100, a.count // (4 * a.workers)))
        jobs = [(str(a.root), lo, min(lo + chunk, a.count), a.seed, a.quality, a.classes, a.count)
                for lo in range(0, a.count, chunk)]
        rows, cpu_s = [], 0.0
        with multiprocessing.get_context("fork").Pool(a.workers, initializer=init_worker, initargs=(a.seed,)) as pool:
            for got, cpu in pool.imap_unordered(make_images, jobs):
                rows += got
                cpu_s += cpu
            t_images = time.monotonic() - t0
            if n_shards:
                shards.mkdir(parents=True, exist_ok=True)
                order = np.random.default_rng([a.seed, 0x5A4D]).permutation(a.count).tolist()
                shard_jobs = [(str(a.root), str(shards), j, order[j * a.shards_per:(j + 1) * a.shards_per],
                               a.classes, a.count) for j in range(n_shards)]
                shard_bytes = sum(pool.imap_unordered(write_shard, shard_jobs))
            else:
                shard_bytes = 0
        sizes = np.array([r[1] for r in rows], dtype=np.float64)
        dims = np.array([(r[2], r[3]) for r in rows], dtype=np.float64)
        stats = {"count": a.count, "classes": a.classes, "mean_kb": round(sizes.mean() / 1000, 1),
                 "median_kb": round(float(np.median(sizes)) / 1000, 1),
                 "p5_kb": round(float(np.percentile(sizes, 5)) / 1000, 1),
                 "p95_kb": round(float(np.percentile(sizes, 95)) / 1000, 1),
                 "total_mb": round(sizes.sum() / 1e6, 1), "mean_width": round(dims[:, 0].mean(), 1),
                 "mean_height": round(dims[:, 1].mean(), 1),
                 "mean_pixels": round(float((dims[:, 0] * dims[:, 1]).mean())),
                 "bits_per_pixel": round(float(8 * sizes.sum() / (dims[:, 0] * dims[:, 1]).sum()), 2),
                 "shards": n_shards, "shards_dir": str(shards) if n_shards else None,
                 "shard_mb": round(shard_bytes / 1e6, 1),
                 "workers": a.workers, "images_s": round(t_images, 1),
                 "cpu_ms_per_image": round(1000 * cpu_s / a.count, 2), "seconds": round(time.monotonic() - t0, 1)}
        marker.write_text(json.dumps({"params": params, "stats": stats}, indent=1) + "\n")
    s = stats
    print(f"make_imagenet_like: {s['count']} JPEGs in {s['classes']} classes under {a.root}: mean {s['mean_kb']} KB "
          f"(median {s['median_kb']}, 5-95% {s['p5_kb']}-{s['p95_kb']}; {s['total_mb']} MB, {s['bits_per_pixel']} "
          f"bits/pixel at quality {a.quality}), mean {s['mean_width']:.0f}x{s['mean_height']:.0f} "
          f"({s['mean_pixels']} pixels)")
    if s["shards"]:
        print(f"make_imagenet_like: {s['shards']} shards of <= {a.shards_per} samples: "
              f"{s['shards_dir']}/train-{{000000..{s['shards'] - 1:06d}}}.tar ({s['shard_mb']} MB)")
    print(f"make_imagenet_like: made in {s['seconds']} s ({s['images_s']} s the images) with {s['workers']} workers, "
          f"{s['cpu_ms_per_image']} CPU ms per image"
          + ("; this call: skipped" if skipped else ""))
    if a.measure_decode > 0:
        print("make_imagenet_like: decode, one thread: " + json.dumps(measure_decode(a, name, a.measure_decode)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
