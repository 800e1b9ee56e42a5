"""PIL / torchvision oracle for the image datasets' `interpolation = "bicubic"` (migration trial F13).

Runs resize_driver (C++: the image datasets' pipeline, tp_image_transforms) and torchvision 0.29's
transforms on PIL 13 images, as timm's validate.py and train.py use them, on the same files:

  * evaluation: Resize(s | (h, w), BICUBIC, antialias=True) then CenterCrop, against the host's
    resize + center_crop (one pass over the surviving pixels); shrinking 1.1x to 8x, enlarging,
    one side shrinking and the other enlarging, no crop, 1-pixel-wide and tiny images;
  * training: F.resized_crop(img, top, left, h, w, size, BICUBIC) on the box the driver drew
    (the pipeline's own RandomResizedCrop draw), against random_resized_crop.

Images: "real-looking" synthetic photographs (a smooth random field, hard-edged shapes, sensor
noise, a fine stripe pattern that aliases without a low-pass filter), RGB and grey, as PNG (the
same pixels on both sides) and JPEG (the host's libjpeg-turbo decode against PIL's).

The bound (every case, every channel): PNG max |host - PIL| <= 1 grey level and mean <= 0.001.
The resampler repeats Resample.c's double-precision weights, their 22-bit rounding and the 8-bit
intermediate image, so the expected difference is 0; 1 level is left for a Pillow build whose
compiler contracts the weight arithmetic into FMA (a weight 1/2^22 off moves a sum across a
rounding boundary at most rarely). JPEG: max <= 2, mean <= 0.05 (two libjpeg-turbo builds; islow
IDCT and fancy upsampling are specified exactly, so in practice also 0). Printed for information:
the bilinear default against PIL's BILINEAR, and PIL's bicubic against torchvision's tensor
kernel (_upsample_bicubic2d_aa).
"""

import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from PIL import Image, ImageDraw
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F
    from torchvision import transforms as T
except ImportError as e:  # pragma: no cover - the runner reports SKIP
    print(f"SKIP: torchvision is not importable ({e}); run scripts/bench_setup to create .venv-bench")
    sys.exit(77)

BICUBIC = InterpolationMode.BICUBIC
BILINEAR = InterpolationMode.BILINEAR


def photo(h, w, seed, grey=False):
    """A synthetic photograph: smooth shading, shapes with hard edges, noise, fine stripes."""
    rng = np.random.default_rng(seed)
    small = rng.uniform(0, 255, (max(2, h // 40 + 2), max(2, w // 40 + 2), 3)).astype(np.float32)
    # Bilinear upsampling of a coarse grid (numpy, no PIL): smooth low-frequency shading.
    ys = np.linspace(0, small.shape[0] - 1, h)
    xs = np.linspace(0, small.shape[1] - 1, w)
    y0 = np.clip(np.floor(ys).astype(int), 0, small.shape[0] - 2)
    x0 = np.clip(np.floor(xs).astype(int), 0, small.shape[1] - 2)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    a = small[y0][:, x0]
    b = small[y0][:, x0 + 1]
    c = small[y0 + 1][:, x0]
    d = small[y0 + 1][:, x0 + 1]
    img = (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    for _ in range(6):
        x1, x2 = sorted(rng.integers(0, max(1, w), 2))
        y1, y2 = sorted(rng.integers(0, max(1, h), 2))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.uniform() < 0.5 else draw.rectangle)([int(x1), int(y1), int(x2), int(y2)], fill=colour)
    arr = np.asarray(pil).astype(np.float32)
    arr += rng.normal(0, 8, arr.shape)
    # A patch of 2-pixel stripes: aliases into false patterns when shrinking without a low-pass filter.
    sh, sw = h // 3, w // 3
    arr[sh:2 * sh, sw:2 * sw, :] = ((np.arange(sw) // 2 % 2) * 200.0)[None, :, None]
    arr = np.clip(arr, 0, 255).astype(np.uint8)
    if grey:
        return Image.fromarray(arr.mean(axis=2).astype(np.uint8), "L")
    return Image.fromarray(arr, "RGB")


# (h, w) of the images: ImageNet-like, portrait, landscape, extreme aspects, 1 pixel wide or tall, tiny.
SIZES = [(375, 500), (500, 333), (224, 224), (480, 640), (90, 1000), (1000, 90), (1, 300), (300, 1),
         (1, 1), (2, 3), (7, 5), (17, 13), (40, 30), (257, 255)]


def eval_cases(h, w):
    """(resize_h, resize_w, crop_h, crop_w) for an h x w image: resize_w = 0 is `resize = [s]`."""
    short = min(h, w)
    cases = []
    for factor in (1.1, 1.5, 2.0, 3.0, 4.7, 8.0, 0.5, 0.13):  # shrink 1.1x..8x; enlarge 2x and ~7.7x
        s = max(1, int(short / factor))
        rh, rw = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
        crop = max(1, int(s * 0.875))
        cases.append((s, 0, min(crop, rh), min(crop, rw)))
    cases.append((256, 0, 224, 224))  # ImageNet's evaluation
    cases.append((32, 0, 0, 0))  # resize alone
    cases.append((max(1, h // 3), w * 2, 0, 0))  # one side shrinks, the other enlarges
    cases.append((h * 3, max(1, w // 5), max(1, h * 3 - 1), max(1, w // 5)))  # and the other way, with a crop
    cases.append((h, w, max(1, h // 2), max(1, w // 2)))  # center_crop alone (no resampling)
    return cases


def torchvision_eval(img, rh, rw, ch, cw, mode):
    size = [rh] if rw == 0 else [rh, rw]
    out = T.Resize(size, interpolation=mode, antialias=True)(img)
    if ch > 0:
        out = T.CenterCrop([ch, cw])(out)
    return out


def to_rgb_array(img):
    return np.asarray(img.convert("RGB")).astype(np.int16)


class Stats:
    def __init__(self):
        self.max = 0
        self.sum = 0.0
        self.count = 0
        self.cases = 0
        self.worst = ""

    def add(self, got, want, label):
        if got.shape != want.shape:
            raise SystemExit(f"FAIL {label}: shape {got.shape} != {want.shape}")
        diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
        m = int(diff.max()) if diff.size else 0
        if m > self.max:
            self.max, self.worst = m, label
        self.sum += float(diff.sum())
        self.count += diff.size
        self.cases += 1

    def mean(self):
        return self.sum / max(1, self.count)

    def line(self, name):
        return (f"{name}: {self.cases} cases, max {self.max} levels, mean {self.mean():.6f} levels"
                + (f" (worst: {self.worst})" if self.max else ""))


def main():
    driver = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="resize_oracle_")
    requests, expected = [], []
    for index, (h, w) in enumerate(SIZES):
        for grey in (False, True) if index % 3 == 0 else (False,):
            img = photo(h, w, seed=index, grey=grey)
            for ext in ("png", "jpg") if (h >= 8 and w >= 8) else ("png",):
                path = os.path.join(tmp, f"{index}_{int(grey)}.{ext}")
                img.save(path, quality=90) if ext == "jpg" else img.save(path)
                # What the user's loader gives: PIL's decode, converted to RGB (timm, ImageFolder).
                with Image.open(path) as f:
                    source = f.convert("RGB")
                for rh, rw, ch, cw in eval_cases(h, w):
                    for mode in ("bicubic", "bilinear"):
                        out = os.path.join(tmp, f"o{len(requests)}.rgb")
                        requests.append(f"{path} {out} {mode} {rh} {rw} {ch} {cw} 0 0 0")
                        expected.append(("eval", ext, mode, source, (rh, rw, ch, cw), out,
                                         f"{h}x{w} {ext}{' grey' if grey else ''} resize {[rh] if rw == 0 else [rh, rw]}"
                                         f" crop {[ch, cw] if ch else []}"))
                for seed in range(6):
                    for rrc in ((224, 224), (32, 32), (160, 96)):
                        out = os.path.join(tmp, f"o{len(requests)}.rgb")
                        requests.append(f"{path} {out} bicubic 0 0 0 0 {rrc[0]} {rrc[1]} {seed + 100 * index}")
                        expected.append(("rrc", ext, "bicubic", source, rrc, out,
                                         f"{h}x{w} {ext}{' grey' if grey else ''} random_resized_crop {list(rrc)} seed {seed}"))
    proc = subprocess.run([driver], input="\n".join(requests) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: resize_driver exited {proc.returncode}: {proc.stderr}")
    lines = proc.stdout.splitlines()
    if len(lines) != len(requests):
        raise SystemExit(f"FAIL: {len(lines)} answers to {len(requests)} requests: {proc.stderr}")
    stats = {key: Stats() for key in ("bicubic png", "bicubic jpg", "bilinear png", "tensor")}
    for line, (kind, ext, mode, source, args, out, label) in zip(lines, expected):
        oh, ow, x, y, bw, bh = (int(v) for v in line.split())
        got = np.fromfile(out, dtype=np.uint8).reshape(oh, ow, 3)
        if kind == "eval":
            want = to_rgb_array(torchvision_eval(source, *args, BICUBIC if mode == "bicubic" else BILINEAR))
        else:
            want = to_rgb_array(F.resized_crop(source, y, x, bh, bw, list(args), BICUBIC, antialias=True))
        if mode == "bilinear":
            if ext == "png":
                stats["bilinear png"].add(got, want, label)
            continue
        stats[f"bicubic {ext}"].add(got, want, label)
        if ext == "png" and kind == "eval" and args[1] == 0 and args[2] == 0 and min(source.size) >= 4:
            # torchvision's tensor kernel on the same pixels, for reference (not the host's bound).
            t = torch.from_numpy(np.asarray(source).copy()).permute(2, 0, 1)
            tv = F.resize(t, [args[0]], interpolation=BICUBIC, antialias=True).permute(1, 2, 0).numpy()
            pil = to_rgb_array(torchvision_eval(source, *args, BICUBIC))
            stats["tensor"].add(tv, pil, label)
    for key, s in stats.items():
        name = {"bicubic png": "bicubic vs PIL (PNG)", "bicubic jpg": "bicubic vs PIL (JPEG, two decoders)",
                "bilinear png": "bilinear (default, unchanged) vs PIL BILINEAR, for information",
                "tensor": "torchvision tensor bicubic (antialias) vs PIL, for information"}[key]
        print(s.line(name))
    failed = []
    if stats["bicubic png"].max > 1 or stats["bicubic png"].mean() > 0.001:
        failed.append("bicubic vs PIL on PNG exceeds max 1 / mean 0.001")
    if stats["bicubic jpg"].max > 2 or stats["bicubic jpg"].mean() > 0.05:
        failed.append("bicubic vs PIL on JPEG exceeds max 2 / mean 0.05")
    if stats["bicubic png"].cases < 200 or stats["bicubic jpg"].cases < 100:
        failed.append("too few cases ran")
    if failed:
        raise SystemExit("FAIL: " + "; ".join(failed))
    print("PASS")


if __name__ == "__main__":
    main()
