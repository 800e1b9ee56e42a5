"""bench/image_pipeline driver: images/s of the host's data loader with the image_folder plugin vs
torchvision ImageFolder + DataLoader, same JPEG folder, transforms, batch and worker count, and the
same JPEGs as WebDataset tar shards: the host's loader with the webdataset plugin vs the
webdataset package + DataLoader; from one invocation (bench/README.md).

    .venv-bench/bin/python bench/image_pipeline/run.py BUILD_DIR [--workers 1,2] [--reps 3]
        [--images synthetic|imagenet_like] [--count 2000] [--variants plain,augmented]
        [--sides host,python,shards,python_wds] [--baseline DIR] [--open-shards 1000] [--root DIR]
        [--plugin-dir DIR]

--images synthetic (the default): the folder (2000 JPEGs, 256x256, 10 classes, make_images.py) is
generated once into --root (default BUILD_DIR/bench/images), and written once as 10 shards of 200
samples (`<key>.jpg` with the same bytes + `<key>.cls`, in a seeded shuffled order so every shard
mixes the classes) by the webdataset package's ShardWriter into ROOT-shards/.
--images imagenet_like: make_imagenet_like.py's set (sizes, file sizes and quality like ImageNet's:
about 400x343 and 110 KB at quality 90), --count images in 100 classes (default 2000) into --root
(default BUILD_DIR/bench/imagenet_like) and the same bytes as shards of 200 in ROOT-shards/.
--baseline DIR: another build of the host side (DIR/bin/image_pipeline_bench, which loads its
plugins from DIR/plugins), e.g. a copy of this build made before a change: its sides host_base and
shards_base join the alternation, and the table gives host/base and shards/base.
Each repetition runs every side once per worker count, alternating the order (reversed every
other repetition); the table shows medians over the repetitions. --open-shards N (0: skip) then
times the host opening N one-sample shards (prepare + create of the train split) without and with
the plugin's index cache.
"""
import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(cmd):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(map(str, cmd))}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def write_shards(root: Path, out: Path, per_shard: int) -> str:
    """The JPEGs of `root` as WebDataset shards in `out` (once); returns their brace pattern."""
    import random

    import webdataset as wds

    files = sorted(root.glob("class_*/*.jpg"))
    classes = sorted({f.parent.name for f in files})
    count = -(-len(files) // per_shard)
    pattern = str(out / f"train-{{000000..{count - 1:06d}}}.tar")
    done = out / f"done-{len(files)}-{per_shard}"
    if done.exists():
        return pattern
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    random.Random(1).shuffle(files)
    with wds.ShardWriter(str(out / "train-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
        for i, f in enumerate(files):
            sink.write({"__key__": f"{i:06d}", "jpg": f.read_bytes(), "cls": classes.index(f.parent.name)})
    done.touch()
    return pattern


def write_tiny_shards(out: Path, count: int) -> str:
    """`count` shards of one 8x8 JPEG sample each (once); returns their brace pattern."""
    import io

    import webdataset as wds
    from PIL import Image

    pattern = str(out / f"tiny-{{000000..{count - 1:06d}}}.tar")
    done = out / f"done-{count}"
    if done.exists():
        return pattern
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (90, 120, 200)).save(buf, "JPEG")
    with wds.ShardWriter(str(out / "tiny-%06d.tar"), maxcount=1, verbose=0) as sink:
        for i in range(count):
            sink.write({"__key__": f"{i:06d}", "jpg": buf.getvalue(), "cls": i % 10})
    done.touch()
    return pattern


def open_shards(build: Path, bench: Path, count: int, reps: int, plugin_dirs: list) -> None:
    """The host's prepare + create over `count` tiny shards: no cache, cache being built, cache found."""
    pattern = write_tiny_shards(build / "bench/tiny_shards", count)
    cache_dir = build / "bench/tiny_shards_cache"
    got = {"no cache": [], "cache: build": [], "cache: found": []}
    for _ in range(reps):
        shutil.rmtree(cache_dir, ignore_errors=True)
        for name, extra in (("no cache", ["--set", "data.train.cache=false"]),
                            ("cache: build", ["--set", "data.train.cache=true", "--set", f"data.train.cache_dir={cache_dir}"]),
                            ("cache: found", ["--set", "data.train.cache=true", "--set", f"data.train.cache_dir={cache_dir}"])):
            text = run([bench, "--shards", pattern, "--open-only", 1, *plugin_dirs, *extra])
            m = re.search(r"prepare_s=([0-9.]+) create_s=([0-9.]+) samples=(\d+)", text)
            if int(m.group(3)) != count:
                sys.exit(f"open shards: {m.group(3)} samples, expected {count}")
            got[name].append((float(m.group(1)), float(m.group(2))))
    print()
    print(f"open shards: the host's prepare + create of {count} one-sample shards (seconds, median of {reps}; "
          f"page cache warm, a fresh process each)")
    print(f"{'index':>14} {'prepare':>9} {'create':>9} {'total':>9}")
    for name, values in got.items():
        prep = statistics.median(v[0] for v in values)
        create = statistics.median(v[1] for v in values)
        total = statistics.median(v[0] + v[1] for v in values)
        print(f"{name:>14} {prep:9.3f} {create:9.3f} {total:9.3f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("build", type=Path)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per run (after one warm-up epoch)")
    p.add_argument("--root", type=Path)
    p.add_argument("--plugin-dir", action="append", default=[])
    p.add_argument("--sides", default=None,
                   help="host (image_folder), python (torchvision ImageFolder), shards (host, webdataset plugin), "
                        "python_wds (webdataset package); with --baseline also host_base, shards_base "
                        "(default: all of them)")
    p.add_argument("--images", choices=("synthetic", "imagenet_like"), default="synthetic",
                   help="synthetic: 2000 JPEGs 256x256 (~20 KB); imagenet_like: make_imagenet_like.py's set")
    p.add_argument("--count", type=int, default=2000, help="--images imagenet_like: how many images")
    p.add_argument("--variants", default="plain,augmented",
                   help="plain (crop, flip, normalise) and/or augmented (+ RandAugment(2, 9), RandomErasing(0.25))")
    p.add_argument("--baseline", type=Path,
                   help="a second build of the host side to alternate with: DIR/bin/image_pipeline_bench, its "
                        "plugins in DIR/plugins (sides host_base, shards_base)")
    p.add_argument("--shard-size", type=int, default=200, help="samples per shard (2000 images: 10 shards)")
    p.add_argument("--open-shards", type=int, default=1000, help="tiny shards the open measurement creates; 0: skip")
    a = p.parse_args()
    build = a.build.resolve()
    default_sides = ["host", "host_base", "python", "shards", "shards_base", "python_wds"]
    sides = a.sides.split(",") if a.sides else [x for x in default_sides if a.baseline or not x.endswith("_base")]
    if any(x.endswith("_base") for x in sides) and not a.baseline:
        sys.exit("the sides host_base and shards_base need --baseline DIR")
    if a.images == "imagenet_like":
        root = (a.root or build / "bench/imagenet_like").resolve()
        run([sys.executable, HERE / "make_imagenet_like.py", root, "--count", a.count, "--classes", 100,
             "--shards-per", a.shard_size])
        count = -(-a.count // a.shard_size)
        shards = str(root.parent / (root.name + "-shards") / f"train-{{000000..{count - 1:06d}}}.tar")
        stats = json.loads((root / "imagenet_like.json").read_text())
        described = (f"{a.count} ImageNet-like JPEGs (make_imagenet_like.py: mean {stats['stats']['mean_width']:.0f}x"
                     f"{stats['stats']['mean_height']:.0f}, {stats['stats']['mean_kb']} KB, q90), 100 classes")
    else:
        root = (a.root or build / "bench/images").resolve()
        run([sys.executable, HERE / "make_images.py", root])
        shards = write_shards(root, root.parent / (root.name + "-shards"), a.shard_size)
        described = "2000 JPEGs 256x256 (q90, ~20 KB), 10 classes"
    common = ["--batch", a.batch, "--size", a.size, "--epochs", a.epochs]
    plugin_dirs = [x for d in a.plugin_dir for x in ("--plugin-dir", d)]
    bench = build / "bin/image_pipeline_bench"
    base_bench = a.baseline.resolve() / "bin/image_pipeline_bench" if a.baseline else None

    rows = []
    versions = ""
    # The recipe row: RandAugment(2, 9) on 8-bit pixels after the flip, RandomErasing(0.25) after
    # normalisation, on both sides.
    augment_host = ["--set", "data.train.rand_augment=[2, 9]", "--set", "data.train.random_erasing=0.25"]
    variants = [v for v in [("plain", [], []), ("augmented", augment_host, ["--augment"])]
                if v[0] in a.variants.split(",")]
    for (variant, host_extra, python_extra), workers in [(v, w) for v in variants for w in map(int, a.workers.split(","))]:
        host = [bench, "--workers", workers, *common, *plugin_dirs, *host_extra]
        python = [sys.executable, HERE / "python_pipeline.py", root, "--workers", workers, *common, *python_extra]
        commands = {"host": [*host, "--root", root], "python": python,
                    "shards": [*host, "--shards", shards], "python_wds": [*python, "--shards", shards]}
        if base_bench:
            base = [base_bench, *host[1:]]
            commands.update({"host_base": [*base, "--root", root], "shards_base": [*base, "--shards", shards]})
        order = [(name, commands[name]) for name in sides]
        got = {name: [] for name in sides}
        for rep in range(a.reps):
            for name, cmd in order if rep % 2 == 0 else order[::-1]:
                text = run(cmd)
                got[name].append(float(re.search(r"images_per_s=([0-9.]+)", text).group(1)))
                if name.startswith("python"):
                    versions = re.search(r"torch=.*", text).group(0)
            print(f"  {variant} workers {workers} rep {rep + 1}: " +
                  " ".join(f"{name}={got[name][-1]:.1f}" for name in sides), flush=True)
        rows.append((variant, workers, {name: statistics.median(v) for name, v in got.items()}))

    print()
    print(f"image_pipeline: images/s, median of {a.reps} alternating repetitions x {a.epochs} timed epochs")
    print(f"  {described}; RandomResizedCrop({a.size}) + hflip 0.5 + normalise; batch {a.batch}, shuffled")
    print()
    if "augmented" in a.variants.split(","):
        print(f"  augmented: + RandAugment(2, 9) after the flip, RandomErasing(0.25) after normalise")
        print()
    columns = [("host", "host", "{:9.1f}"), ("host_base", "host base", "{:10.1f}"),
               ("python", "torchvision", "{:12.1f}"), ("shards", "shards", "{:9.1f}"),
               ("shards_base", "shards base", "{:12.1f}"), ("python_wds", "python wds", "{:11.1f}")]
    ratios = [("host", "python", "host/python"), ("host", "host_base", "host/base"),
              ("shards", "host", "shards/folder"), ("shards", "shards_base", "shards/base"),
              ("shards", "python_wds", "shards/py-wds")]
    head = [f"{label:>{len(fmt.format(0.0))}}" for name, label, fmt in columns if name in sides]
    head += [f"{label:>14}" for num, den, label in ratios if num in sides and den in sides]
    print(f"{'transforms':>10} {'workers':>7} " + " ".join(head))
    for variant, workers, m in rows:
        cells = [fmt.format(m[name]) for name, label, fmt in columns if name in sides]
        cells += [f"{m[num] / m[den]:14.2f}" for num, den, label in ratios if num in sides and den in sides]
        print(f"{variant:>10} {workers:7d} " + " ".join(cells))
    print()
    print("host: framework DataLoader (worker threads, collate in the workers) + image_folder (OpenCV decode/augment).")
    print("torchvision: ImageFolder (PIL) + DataLoader (worker processes, persistent_workers=True). Goal host/python >= 1.5.")
    print(f"shards: the host's DataLoader + webdataset over {shards} (the same JPEG bytes; samples shuffled within "
          "windows of 4 shards, data.group_window).")
    if base_bench:
        print(f"base: the same sides with {base_bench} and its plugins (--baseline).")
    print("python wds: webdataset.WebDataset(shardshuffle) + shuffle(800) + decode('pil') + the same transforms + "
          "DataLoader (each worker its own shards).")
    if versions:
        print(f"Python side: {versions} (LibTorch 2.14.1, from .venv-bench; the host links 2.13.0).")
    if a.open_shards > 0:
        open_shards(build, bench, a.open_shards, a.reps, plugin_dirs)


if __name__ == "__main__":
    main()
