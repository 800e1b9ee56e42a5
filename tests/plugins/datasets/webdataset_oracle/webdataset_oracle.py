"""webdataset oracle for org.torchhost.webdataset.

Writes small sets of tar shards with the `webdataset` package's own ShardWriter (its member
names, tar headers and label encodings), reads them back with `webdataset.WebDataset` (no
shuffle; its "rgb8" decoder is PIL's, its "cls" and "json" decoders its own) and compares every
sample with what webdataset_driver (C++: the built webdataset.so through its C ABI) prints:

  * the number of samples and their order (index i is webdataset's i-th sample: shard by shard,
    members in tar order), and the sample groups when the plugin declares them (ABI 1.10: one
    group per shard, ending at each shard's last sample);
  * labels, exactly: `.cls` text integers (ShardWriter's `str(n)`, one written by hand as
    "7\\n"), and `.json` objects read at json_label_key;
  * images: [3, H, W] float32 equal to webdataset's decoded RGB / 255 (resize, center_crop and
    the augmentations unset; mean 0, std 1). PNG and lossless WebP exactly (after * 255 and
    rounding; the floats are integers / 255 within 1e-3); JPEG within MEAN_TOLERANCE /
    MAX_TOLERANCE grey levels: PIL and OpenCV decode with their own libjpeg-turbo builds
    (measured maxima are printed).

The shards cover what real WebDataset shards hold: PNG (RGB, grey, RGBA, palette), JPEG (4:2:0
at odd sizes, grey, one with an EXIF orientation that both sides ignore), lossless WebP, the
extensions jpg/jpeg/png/webp and an upper-case `.PNG` (webdataset lowercases extensions), a
member that is neither image nor label (ignored), keys with a directory part and a dot in that
directory (the key ends at the first dot of the member's base name), short last shards, a
split (`val_shards`) that is a brace sub-range of another's shards, and the index cache (`cache =
true`: the first run's prepare writes the shards' indexes, the second run's create reads them;
the same samples either way, the plugin's log lines printed).

And the other direction, `host shards write`: an image folder (JPEG and PNG, mixed-case
extensions, sub-folders, three classes, one of them written last) goes through the host into
shards of a few KB; `webdataset.WebDataset` reads them back undecoded: keys 000000.. in order,
every image member's bytes equal to its source file's, `cls` its class id and `json` its class
name and path, each file of the folder once (shuffled across the shards, the default) or, with
--keep-order, in torchvision ImageFolder's order (sorted classes, then sorted paths); and the
plugin reads the same shards back as the same samples (the driver, as above).

Needs .venv-bench (scripts/bench_setup: webdataset 1.0.2, PIL, numpy); without it the test
exits 77, which ctest reports as SKIP.
"""
import io
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import webdataset as wds
    from PIL import Image
except ImportError as e:  # pragma: no cover - the SKIP path
    print(f"SKIP: webdataset, numpy or PIL is not importable ({e}); run scripts/bench_setup to create .venv-bench")
    sys.exit(77)

# JPEG: the two libjpeg-turbo builds (PIL's wheel, the system OpenCV's) agree bit for bit on
# these images in the measured runs; the bounds leave room for another build's IDCT or upsampling.
MEAN_TOLERANCE = 0.5
MAX_TOLERANCE = 4
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def picture(rs, h, w):
    """A smooth gradient with noise: JPEG-typical content, different in every channel."""
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 200.0 / w + 20, yy * 180.0 / h + 30, (xx + yy) * 90.0 / (h + w) + 80], -1)
    img += rs.randint(-20, 20, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(rs, kind, h, w):
    """(extension, bytes) of one image of `kind`."""
    rgb = Image.fromarray(picture(rs, h, w))
    buf = io.BytesIO()
    if kind == "png":
        rgb.save(buf, "PNG")
    elif kind == "png_grey":
        rgb.convert("L").save(buf, "PNG")
    elif kind == "png_rgba":
        alpha = Image.fromarray(rs.randint(0, 256, (h, w), dtype=np.uint8))
        rgba = rgb.copy()
        rgba.putalpha(alpha)
        rgba.save(buf, "PNG")
    elif kind == "png_palette":
        rgb.quantize(colors=37).save(buf, "PNG")
    elif kind in ("jpg", "jpeg"):
        rgb.save(buf, "JPEG", quality=90)  # 4:2:0
    elif kind == "jpg_grey":
        rgb.convert("L").save(buf, "JPEG", quality=90)
    elif kind == "jpg_exif":
        exif = Image.Exif()
        exif[0x0112] = 6  # "rotate 90 CW to display": PIL's decoder and the plugin both ignore it
        rgb.save(buf, "JPEG", quality=85, exif=exif.tobytes())
    elif kind == "webp":
        rgb.save(buf, "WEBP", lossless=True)
    else:
        raise ValueError(kind)
    ext = {"png_grey": "png", "png_rgba": "png", "png_palette": "png", "jpg_grey": "jpg", "jpg_exif": "jpg"}.get(kind, kind)
    return ext, buf.getvalue()


# (kind, height, width); odd sizes exercise JPEG's chroma upsampling at the edges.
CLS_SAMPLES = [("jpg", 37, 53), ("png", 40, 40), ("jpeg", 64, 31), ("png_grey", 23, 45), ("jpg", 80, 61),
               ("png_rgba", 33, 29), ("webp", 27, 38), ("jpg_grey", 41, 35), ("png_palette", 30, 50),
               ("jpg_exif", 45, 70), ("png", 17, 19)]
JSON_SAMPLES = [("jpg", 50, 50), ("png", 35, 47), ("jpg", 21, 64), ("png", 60, 22), ("jpeg", 48, 33),
                ("png", 25, 25), ("jpg", 39, 41)]


def write_sets(d):
    """The shard sets; returns {name: brace pattern}."""
    rs = np.random.RandomState(7)
    # cls: 11 samples, 4 per shard -> 4, 4, 3 (a short last shard).
    with wds.ShardWriter(os.path.join(d, "cls-%06d.tar"), maxcount=4, verbose=0) as sink:
        for i, (kind, h, w) in enumerate(CLS_SAMPLES):
            ext, data = encode(rs, kind, h, w)
            sample = {"__key__": f"{i:06d}", ext: data, "cls": int(rs.randint(0, 10))}
            if i == 4:
                sample = {"__key__": f"{i:06d}", "PNG": encode(rs, "png", h, w)[1], "cls": 3}  # upper case
            if i == 6:
                sample["txt"] = "a caption: neither image nor label"
            if i == 9:
                sample["cls"] = b"7\n"  # as `echo 7 > x.cls` writes it
            sink.write(sample)
    # json: 7 samples, 3 per shard -> 3, 3, 1; keys with a directory part, one directory with a dot.
    with wds.ShardWriter(os.path.join(d, "json-%06d.tar"), maxcount=3, verbose=0) as sink:
        for i, (kind, h, w) in enumerate(JSON_SAMPLES):
            ext, data = encode(rs, kind, h, w)
            folder = "v1.0/train" if i % 2 else "train"
            sink.write({"__key__": f"{folder}/{i:06d}", ext: data,
                        "json": {"caption": f"sample {i}", "label": int(rs.randint(0, 100)), "extra": [1, 2]}})
    return {"cls": os.path.join(d, "cls-{000000..000002}.tar"), "json": os.path.join(d, "json-{000000..000002}.tar"),
            "cls_tail": os.path.join(d, "cls-{000001..000002}.tar")}


IMAGE_EXTENSIONS = ["jpg", "jpeg", "png", "webp"]


def reference(pattern, label_extension, json_label_key="label"):
    """webdataset's samples: [(key, url, image extension, label, HWC uint8 RGB)]."""
    out = []
    for s in wds.WebDataset(pattern, shardshuffle=False, empty_check=False).decode("rgb8"):
        exts = [e for e in IMAGE_EXTENSIONS if e in s]
        check(len(exts) == 1, f"{pattern}: webdataset sample {s['__key__']} has image members {exts}")
        label = s[label_extension]
        if label_extension == "json":
            label = label[json_label_key]
        out.append((s["__key__"], s["__url__"], exts[0], int(label), s[exts[0]]))
    return out


# Every key the plugin declares, with its default (the fake host fills none; the real host does).
DEFAULTS = {
    "shards": "", "val_shards": "", "test_shards": "", "image_extensions": IMAGE_EXTENSIONS,
    "label_extension": "cls", "json_label_key": "label", "sample_names": "source", "cache": False, "cache_dir": "",
    "resize": [], "center_crop": [], "random_resized_crop": [], "scale": [0.08, 1.0],
    "ratio": [0.75, 1.3333333333333333], "interpolation": "bilinear", "hflip": 0.0, "brightness": 0.0, "contrast": 0.0, "saturation": 0.0,
    "rand_augment": [], "trivial_augment": False, "random_erasing": 0.0, "erasing_scale": [0.02, 0.33],
    "erasing_ratio": [0.3, 3.3], "erasing_value": "zero", "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
    "channels_last": False, "fast_decode": True, "max_image_pixels": 178956970, "class_names": [],
    "views": 1, "local_views": 0, "local_crop": [96], "local_scale": [0.05, 0.4],
}
# Keys whose value is an array (an empty list carries no type of its own).
INT_ARRAYS = {"resize", "center_crop", "random_resized_crop", "rand_augment", "local_crop"}


def driver_args(keys):
    values = dict(DEFAULTS)
    values.update(keys)
    out = []
    for k, v in values.items():
        if isinstance(v, bool):
            out.append(f"{k}=b:{int(v)}")
        elif isinstance(v, int):
            out.append(f"{k}=i:{v}")
        elif isinstance(v, float):
            out.append(f"{k}=f:{v!r}")
        elif isinstance(v, str):
            out.append(f"{k}=s:{v}")
        elif k in INT_ARRAYS:
            out.append(f"{k}=ia:{','.join(str(x) for x in v)}")
        elif all(isinstance(x, str) for x in v):
            out.append(f"{k}=sa:{','.join(v)}")
        else:
            out.append(f"{k}=fa:{','.join(repr(float(x)) for x in v)}")
    return out


def shard_ends(samples):
    """The end index of each shard's run of samples (webdataset's __url__ changes)."""
    ends = []
    for i, s in enumerate(samples):
        if i + 1 == len(samples) or samples[i + 1][1] != s[1]:
            ends.append(i + 1)
    return ends


def write_folder(root):
    """An image_folder tree; returns [(path relative to root, class id, class name)] in
    ImageFolder's order: classes sorted, then each class's files sorted by path."""
    rs = np.random.RandomState(11)
    layout = {"zebra": ["b.JPG", "a.png", "sub/c.jpeg"], "ant": ["x.png", "y.jpg"], "moth": ["m1.PNG", "m0.jpg"]}
    for cls, names in layout.items():
        for name in names:
            path = os.path.join(root, cls, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            kind = "png" if name.lower().endswith("png") else "jpg"
            with open(path, "wb") as f:
                f.write(encode(rs, kind, 20 + len(name), 31)[1])
    order = []
    for label, cls in enumerate(sorted(layout)):
        for name in sorted(layout[cls]):
            order.append((f"{cls}/{name}", label, cls))
    return order


def check_host_shards(host, driver, plugin, d):
    """host shards write, read back by webdataset and by the plugin; returns the samples compared."""
    root = os.path.join(d, "folder")
    order = write_folder(root)
    config = os.path.join(d, "folder.toml")
    with open(config, "w") as f:  # [data.train] alone: all the command reads
        f.write('[data.train]\ncomponent = "org.torchhost.image_folder"\nroot = "folder"\n')
    compared = 0
    for mode, extra in (("shuffled", []), ("listing order", ["--keep-order"])):
        out = os.path.join(d, "written_" + mode.replace(" ", "_"))
        res = subprocess.run([host, "shards", "write", "--config", config, "--out", out, "--shard-size", "3KB", *extra],
                             capture_output=True, text=True)
        check(res.returncode == 0, f"host shards write ({mode}) failed ({res.returncode}): {res.stdout}{res.stderr}")
        if res.returncode:
            continue
        pattern = next(line.split('"')[1] for line in res.stdout.splitlines() if line.startswith("shards = "))
        shards = sorted(x for x in os.listdir(out) if x.endswith(".tar"))
        check(len(shards) >= 3, f"host shards write: {len(shards)} shards of 3 KB for {len(order)} images")
        got = list(wds.WebDataset(pattern, shardshuffle=False, empty_check=False))
        check(len(got) == len(order), f"host shards: webdataset reads {len(got)} samples, the folder holds {len(order)}")
        by_source = {relative: (label, cls) for relative, label, cls in order}
        sources = [json.loads(sample["json"])["source"] for sample in got]
        check(sorted(sources) == sorted(by_source), f"host shards ({mode}): the sources {sources} are not the folder's")
        if mode == "listing order":
            check(sources == [relative for relative, _, _ in order], f"host shards: --keep-order gave {sources}")
        for i, sample in enumerate(got):
            relative = json.loads(sample["json"])["source"]
            if relative not in by_source:
                continue
            label, cls = by_source[relative]
            where = f"host shards ({mode}) sample {i} ({relative})"
            ext = os.path.splitext(relative)[1][1:].lower()
            check(sample["__key__"] == f"{i:06d}", f"{where}: key {sample['__key__']!r}")
            with open(os.path.join(root, relative), "rb") as f:
                check(sample.get(ext) == f.read(), f"{where}: the .{ext} member is not the file's bytes")
            check(int(sample["cls"]) == label, f"{where}: cls {sample['cls']!r} != {label}")
            meta = json.loads(sample["json"])
            check(meta == {"label": label, "class": cls, "source": relative}, f"{where}: json {meta}")
        # The plugin reads them as the same samples, with the folder's labels.
        out_dir = os.path.join(d, "out_host_shards_" + mode.replace(" ", "_"))
        os.makedirs(out_dir)
        res = subprocess.run([driver, plugin, "train", out_dir, *driver_args({"shards": pattern})],
                             capture_output=True, text=True)
        check(res.returncode == 0, f"host shards: driver failed: {res.stderr.strip()}")
        if res.returncode == 0:
            lines = [json.loads(line) for line in res.stdout.splitlines()]
            check([s["label"] for s in lines[:-1]] == [int(s["cls"]) for s in got], "host shards: plugin labels")
            check(lines[-1]["groups"] == shard_ends([(0, s["__url__"]) for s in got]), "host shards: plugin groups")
        print(f"  host shards write ({mode}): {len(got)} samples in {len(shards)} shards, bytes, keys and labels "
              "as the folder's")
        compared += len(got)
    return compared


def main():
    driver, plugin, host = sys.argv[1], sys.argv[2], sys.argv[3]
    started = time.time()
    print(f"webdataset {wds.__version__}, PIL {Image.__version__}, numpy {np.__version__}")
    worst = {}  # kind -> [worst mean, worst max, samples]
    n = 0
    with tempfile.TemporaryDirectory() as d:
        sets = write_sets(d)
        cases = [
            # (name, split, keys, webdataset pattern, label extension)
            ("cls", "train", {"shards": sets["cls"]}, sets["cls"], "cls"),
            ("json", "train", {"shards": sets["json"], "label_extension": "json"}, sets["json"], "json"),
            ("val_shards", "val", {"shards": sets["json"], "val_shards": sets["cls_tail"]}, sets["cls_tail"], "cls"),
            ("cache_build", "train", {"shards": sets["cls"], "cache": True, "cache_dir": os.path.join(d, "cache")},
             sets["cls"], "cls"),
            ("cache_found", "train", {"shards": sets["cls"], "cache": True, "cache_dir": os.path.join(d, "cache")},
             sets["cls"], "cls"),
        ]
        for case, split, keys, pattern, label_ext in cases:
            want = reference(pattern, label_ext)
            out_dir = os.path.join(d, f"out_{case}")
            os.makedirs(out_dir)
            res = subprocess.run([driver, plugin, split, out_dir, *driver_args(keys)], capture_output=True, text=True)
            check(res.returncode == 0, f"{case}: driver failed: {res.stderr.strip()}")
            if res.returncode:
                continue
            lines = [json.loads(line) for line in res.stdout.splitlines()]
            got, summary = lines[:-1], lines[-1]
            check(summary["size"] == len(want), f"{case}: {summary['size']} samples, webdataset reads {len(want)}")
            check([s["index"] for s in got] == list(range(len(got))), f"{case}: the driver's indices are not 0..n-1")
            ends = shard_ends(want)
            if summary["groups"]:
                check(summary["groups"] == ends, f"{case}: sample groups {summary['groups']} != the shards' ends {ends}")
            else:
                print(f"  {case}: the plugin declares no sample groups (shards end at {ends})")
            for s, (key, url, ext, label, rgb) in zip(got, want):
                where = f"{case} sample {s['index']} ({os.path.basename(url)}: {key}.{ext})"
                check(s["label"] == label, f"{where}: label {s['label']} != webdataset's {label}")
                h, w = rgb.shape[:2]
                check(s["shape"] == [3, h, w], f"{where}: shape {s['shape']} != [3, {h}, {w}]")
                if s["shape"] != [3, h, w]:
                    continue
                image = np.fromfile(os.path.join(out_dir, s["file"]), dtype=np.float32).reshape(3, h, w) * 255.0
                off = float(np.abs(image - image.round()).max())
                worst["to [0, 1]"] = max(worst.get("to [0, 1]", 0.0), off)
                check(off <= 1e-3, f"{where}: pixels are not v / 255 (off by {off:.3g})")
                diff = np.abs(image.round().astype(np.int32) - rgb.transpose(2, 0, 1).astype(np.int32))
                mean, mx = float(diff.mean()), int(diff.max())
                kind = "jpeg" if ext in ("jpg", "jpeg") else ext
                wm = worst.setdefault(kind, [0.0, 0, 0])
                wm[0], wm[1], wm[2] = max(wm[0], mean), max(wm[1], mx), wm[2] + 1
                if kind == "jpeg":
                    check(mean <= MEAN_TOLERANCE and mx <= MAX_TOLERANCE,
                          f"{where}: image differs by mean {mean:.3f}, max {mx} grey levels")
                else:
                    check(mx == 0, f"{where}: lossless image differs (mean {mean:.3f}, max {mx} grey levels)")
                n += 1
            print(f"  {case}: {len(got)} samples over {len(ends)} shards ({', '.join(map(str, ends))} ends)")
            if keys.get("cache"):
                for line in summary["logs"]:
                    print(f"    plugin log: {line}")
        n += check_host_shards(host, driver, plugin, d)
    print(f"{n} samples compared in {time.time() - started:.1f} s; count, order, labels and shapes as webdataset's")
    print(f"  to [0, 1]: pixels * 255 off integers by at most {worst.get('to [0, 1]', 0.0):.3g}")
    for kind in sorted(k for k in worst if k != "to [0, 1]"):
        mean, mx, count = worst[kind]
        print(f"  {kind:5s} ({count:2d} samples): worst mean difference {mean:.3f}, max {mx} grey levels")
    if failures:
        print(f"{len(failures)} comparison(s) failed")
        return 1
    print("all comparisons within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
