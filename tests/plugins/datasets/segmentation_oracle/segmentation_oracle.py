"""torchvision oracle for segmentation_folder's joint transforms.

Runs segmentation_driver (C++: the plugin's joint_transform and mask_png sources, image_folder's
pixel_io, OpenCV) and torchvision 0.29's transforms.v2.functional on the same (Image, Mask) pair
with the plan the driver printed (sizes, RandomResizedCrop box, flip, padding, crop offsets,
jitter factors), and compares. Needs .venv-bench (scripts/bench_setup); without it the test
exits 77, which ctest reports as SKIP.

Tolerances:
  * masks: exactly equal, every case (nearest resize as torch's interpolate(mode="nearest"),
    crop, flip, pad with 255). The mask file is a palette PNG, so this also checks that the
    driver reads its indices, not its colours.
  * images after the geometric steps (8-bit, before normalisation): OpenCV resizes with area
    averaging when shrinking and bilinear otherwise, torchvision with its antialiased bilinear
    (a triangle filter whose support grows with the shrink factor); they are different filters.
    On these smooth-plus-noise test images: mean absolute difference <= MEAN_TOLERANCE grey
    levels and max <= MAX_TOLERANCE (measured maxima printed). Measured with torchvision 0.29.1:
    shrinking both sides mean <= 1.4, max 8; enlarging mean 0.2, max 1; a resize that shrinks one
    side and enlarges the other (OpenCV then interpolates bilinearly without antialiasing) mean
    2.2, max 11. Without a resize (crop, flip, pad only) the images are exactly equal.
  * jitter + normalisation: torchvision's adjust_brightness, adjust_contrast, adjust_saturation
    (that fixed order) and normalize applied to the driver's 8-bit geometry output equal the
    driver's floats within 1e-5.
  * plan: a RandomResize shorter side s gives the size F.resize(img, [s]) gives.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torchvision
    from PIL import Image
    from torchvision import tv_tensors
    from torchvision.transforms.v2 import functional as F
except ImportError as e:  # pragma: no cover - the SKIP path
    print(f"SKIP: torchvision is not importable ({e}); run scripts/bench_setup to create .venv-bench")
    sys.exit(77)

MEAN_TOLERANCE = 2.5
MAX_TOLERANCE = 12
IGNORE = 255
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def palette():
    rs = np.random.RandomState(3)
    pal = rs.randint(0, 256, (256, 3)).astype(np.uint8)
    pal[0] = 0
    return pal.flatten().tolist()


def make_pair(d, name, h, w, seed):
    """A smooth image with mild noise and a blocky mask of classes 0..20 plus some 255 pixels,
    the mask saved as a palette PNG."""
    rs = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 200.0 / w + 20, yy * 180.0 / h + 30, (xx + yy) * 90.0 / (h + w) + 80], -1)
    img += rs.randint(-12, 12, (h, w, 3))
    mask = np.zeros((h, w), np.uint8)
    for _ in range(12):
        y0, x0 = rs.randint(0, h), rs.randint(0, w)
        mask[y0:y0 + rs.randint(3, h // 2), x0:x0 + rs.randint(3, w // 2)] = rs.randint(1, 21)
    mask[rs.randint(0, h, 20), rs.randint(0, w, 20)] = IGNORE
    ip, mp = os.path.join(d, name + ".png"), os.path.join(d, name + "_mask.png")
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(ip)
    m = Image.fromarray(mask, "P")
    m.putpalette(palette())
    m.save(mp)
    return ip, mp, torch.from_numpy(np.array(Image.open(ip).convert("RGB"))).permute(2, 0, 1).contiguous(), \
        torch.from_numpy(mask)


def read_plan(lines):
    plan = {}
    for line in lines:
        f = line.split()
        plan[f[0]] = [float(x) if "." in x or "e" in x else int(x) for x in f[1:]]
    return plan


def torchvision_geometry(img, mask, plan):
    img, mask = tv_tensors.Image(img), tv_tensors.Mask(mask)
    h, w = plan["sized"]
    if "box" in plan:
        x, y, bw, bh = plan["box"]
        img = F.resized_crop(img, y, x, bh, bw, [h, w], antialias=True)
        mask = F.resized_crop(mask, y, x, bh, bw, [h, w])
    elif list(img.shape[-2:]) != [h, w]:
        img = F.resize(img, [h, w], antialias=True)
        mask = F.resize(mask, [h, w])
    if plan["flip"][0]:
        img, mask = F.horizontal_flip(img), F.horizontal_flip(mask)
    if "crop" in plan:
        ch, cw, top, left, pad_b, pad_r = plan["crop"]
        # references/segmentation's PadIfSmaller: bottom/right, image 0, mask 255.
        img = F.pad(img, [0, 0, pad_r, pad_b], fill=0)
        mask = F.pad(mask, [0, 0, pad_r, pad_b], fill=IGNORE)
        img, mask = F.crop(img, top, left, ch, cw), F.crop(mask, top, left, ch, cw)
    return img.as_subclass(torch.Tensor), mask.as_subclass(torch.Tensor)


CASES = [
    # (name, options, seeds): torchvision's segmentation recipe at a small scale, RandomResizedCrop,
    # and the val/test resizes (shorter side, exact size with one side enlarged).
    ("recipe", ["train=1", "random_resize=24,96", "hflip=0.5", "crop=48,48", "jitter=0.4,0.4,0.4"], range(10)),
    ("rrc", ["train=1", "rrc=40,56", "hflip=0.5", "crop=32,32"], range(8)),
    ("crop_only", ["train=1", "hflip=0.5", "crop=72,100"], range(4)),
    ("val_short", ["train=0", "resize=40"], [0]),
    ("val_exact", ["train=0", "resize=37,91"], [0]),
    ("val_up", ["train=0", "resize=150"], [0]),
]


def main():
    driver = sys.argv[1]
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    worst = {}
    n = 0
    with tempfile.TemporaryDirectory() as d:
        pairs = [make_pair(d, "a", 61, 83, 1), make_pair(d, "b", 90, 64, 2)]
        out_img, out_mask, out_f32 = (os.path.join(d, x) for x in ("o.png", "o_mask.png", "o.f32"))
        for ip, mp, img, mask in pairs:
            for name, opts, seeds in CASES:
                for seed in seeds:
                    res = subprocess.run([driver, ip, mp, str(seed), out_img, out_mask, out_f32, *opts],
                                         capture_output=True, text=True)
                    where = f"{os.path.basename(ip)} {name} seed {seed}"
                    check(res.returncode == 0, f"{where}: driver failed: {res.stderr.strip()}")
                    if res.returncode:
                        continue
                    plan = read_plan(res.stdout.splitlines())
                    want_img, want_mask = torchvision_geometry(img, mask, plan)
                    got_img = torch.from_numpy(np.array(Image.open(out_img).convert("RGB"))).permute(2, 0, 1)
                    got_mask = torch.from_numpy(np.array(Image.open(out_mask)))
                    check(got_mask.shape == want_mask.shape and bool((got_mask == want_mask).all()),
                          f"{where}: masks differ ({int((got_mask != want_mask).sum()) if got_mask.shape == want_mask.shape else 'shape'})")
                    check(got_img.shape == want_img.shape, f"{where}: image shape {tuple(got_img.shape)} != {tuple(want_img.shape)}")
                    if got_img.shape != want_img.shape:
                        continue
                    diff = (got_img.int() - want_img.int()).abs()
                    resized = list(img.shape[-2:]) != plan["sized"] or "box" in plan
                    mean, mx = float(diff.float().mean()), int(diff.max())
                    w = worst.setdefault(name, [0.0, 0])
                    w[0], w[1] = max(w[0], mean), max(w[1], mx)
                    if resized:
                        check(mean <= MEAN_TOLERANCE and mx <= MAX_TOLERANCE,
                              f"{where}: image differs by mean {mean:.3f}, max {mx} grey levels")
                    else:
                        check(mx == 0, f"{where}: image differs by {mx} grey levels without a resize")
                    # Jitter and normalisation on the driver's own 8-bit geometry output.
                    b, c, s = plan["jitter"]
                    x = F.to_dtype(got_img, torch.float32, scale=True)
                    x = F.adjust_saturation(F.adjust_contrast(F.adjust_brightness(x, b), c), s)
                    x = F.normalize(x, [0.5] * 3, [0.25] * 3)
                    got = torch.from_numpy(np.fromfile(out_f32, dtype=np.float32)).view(x.shape)
                    err = float((got - x).abs().max())
                    worst["float"] = [0.0, max(worst.get("float", [0.0, 0])[1], err)]
                    check(err <= 1e-5, f"{where}: normalised floats differ by {err:.3g}")
                    if name == "recipe":
                        # The drawn shorter side reproduces the plan's size through torchvision's rule.
                        short = min(plan["sized"])
                        check(list(F.resize(img, [short], antialias=True).shape[-2:]) == plan["sized"],
                              f"{where}: RandomResize size {plan['sized']} is not F.resize(img, [{short}])'s")
                    n += 1
    print(f"{n} samples compared; masks exactly equal in every case")
    for name, (mean, mx) in worst.items():
        if name == "float":
            print(f"  jitter + normalise: max difference {mx:.3g}")
        else:
            print(f"  {name:10s} image: worst mean difference {mean:.3f}, max {mx} grey levels")
    if failures:
        print(f"{len(failures)} comparison(s) failed")
        return 1
    print("all comparisons within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
