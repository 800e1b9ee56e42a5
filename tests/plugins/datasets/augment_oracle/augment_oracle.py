"""torchvision oracle for image_folder's RandAugment / TrivialAugmentWide / RandomErasing.

Runs augment_driver (C++: the plugin's augment sources + OpenCV) and torchvision 0.29's
transforms.v2 on the same uint8 images and compares. Needs .venv-bench (scripts/bench_setup);
without it the test exits 77, which ctest reports as SKIP.

Tolerances (grey levels, per op; the measured maxima are printed):
  * colour ops (Brightness, Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast,
    Equalize) and Identity: exact (0). The C++ repeats torchvision's float32 arithmetic,
    truncating cast and fused multiply-adds.
  * TranslateX/Y: exact (whole-pixel shifts).
  * ShearX/Y, Rotate (nearest neighbour): exact at every output pixel whose sampling coordinate
    (computed in float64 from torchvision's own inverse matrix) lies farther than
    BOUNDARY_DISTANCE from a .5 boundary. Within it the chosen source pixel depends on float32
    rounding, which torch's vectorised grid arithmetic does per CPU (fused or reordered
    multiply-adds: shear 0.2 puts a fifth of the columns on a boundary, and 1% of the pixels
    differed on an AVX-512 machine where another CPU matched), so those pixels may take a
    neighbour's value. The rest must be equal: the C++ computes the same grid.
  * Magnitudes: the C++ table value equals float(torchvision's table[bin]) exactly.
  * RandomErasing: given the same uniform draws, the box (i, j, h, w, erased or not) equals
    torchvision's make_params exactly; values are 0 ("zero") or N(0, 1) draws ("random",
    checked by their mean and spread, as the generators differ).
  * Whole pipeline (flip, ops, normalise, erase): torchvision on the plan the C++ printed,
    within 1e-6 after normalisation plus the geometry allowance above.
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torchvision
    from PIL import Image
    from torchvision.transforms import v2 as T
    from torchvision.transforms.v2 import functional as F
    import torchvision.transforms.v2._augment as tv_augment
except ImportError as e:  # pragma: no cover - the SKIP path
    print(f"SKIP: torchvision is not importable ({e}); run scripts/bench_setup to create .venv-bench")
    sys.exit(77)

GEOMETRY_OPS = {"ShearX", "ShearY", "Rotate"}
GEOMETRY_PIXEL_FRACTION = 0.002  # the whole pipeline: geometric ops composed on boundary pixels
BOUNDARY_DISTANCE = 1e-4  # float32 rounding of a coordinate below ~300 is ~3e-5
OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
       "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"]
BINS = [0, 1, 5, 9, 14, 15, 20, 25, 30]
LARGE_BINS = [9, 20, 30]
SPACES = {"rand": T.RandAugment._AUGMENTATION_SPACE, "wide": T.TrivialAugmentWide._AUGMENTATION_SPACE}
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def make_images(d):
    """Four RGB test images: smooth + noise (non-square, odd sizes), a low-contrast one (so
    AutoContrast and Equalize have work to do), a square one (Rotate's rot90 fast paths) and a
    160x224 one (a training-sized crop: longer geometry rows, Contrast's mean over 35840 pixels)."""
    rs = np.random.RandomState(15)
    yy, xx = np.mgrid[0:37, 0:53]
    base = np.stack([xx * 4.5, yy * 6.5, (xx + yy) * 2.8], -1) + rs.randint(-30, 30, (37, 53, 3))
    low = 60 + (rs.rand(29, 41, 3) * 90) ** 1.2 / 2
    square = rs.randint(0, 256, (32, 32, 3))
    yy, xx = np.mgrid[0:160, 0:224]
    large = np.stack([xx * 1.1, yy * 1.5, 255 - xx * 0.6], -1) + rs.randint(-40, 40, (160, 224, 3))
    paths = []
    for name, a in (("smooth", base), ("low", low), ("square", square), ("large", large)):
        p = os.path.join(d, name + ".png")
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(p)
        paths.append(p)
    return paths


def load(path):
    return torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()


def torchvision_op(img, op, magnitude):
    ra = T.RandAugment()
    return ra._apply_image_or_video_transform(img, op, magnitude, interpolation=T.InterpolationMode.NEAREST,
                                              fill=ra._fill)


def rounding_boundary_pixels(op, magnitude, h, w):
    """[h, w] bool: the output pixels whose nearest source pixel is decided by float rounding,
    i.e. whose sampling coordinate (float64, torchvision's inverse affine matrix and grid
    formulas: ix = m0 x' + m1 y' + m2 + (w - 1) / 2 with x' = x - (w - 1) / 2) lies within
    BOUNDARY_DISTANCE of a .5 boundary, in x or in y."""
    from torchvision.transforms.v2.functional._geometry import _get_inverse_affine_matrix
    if op == "Rotate":
        m = _get_inverse_affine_matrix([0.0, 0.0], -magnitude, [0.0, 0.0], 1.0, [0.0, 0.0])
    else:
        shear = math.degrees(math.atan(magnitude))
        m = _get_inverse_affine_matrix([-0.5 * w, -0.5 * h], 0.0, [0.0, 0.0], 1.0,
                                       [shear, 0.0] if op == "ShearX" else [0.0, shear])
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64) - (h - 1) / 2,
                            torch.arange(w, dtype=torch.float64) - (w - 1) / 2, indexing="ij")
    ix = m[0] * xs + m[1] * ys + m[2] + (w - 1) / 2
    iy = m[3] * xs + m[4] * ys + m[5] + (h - 1) / 2
    near = lambda c: ((c - torch.floor(c)) - 0.5).abs() < BOUNDARY_DISTANCE
    return near(ix) | near(iy)


def compare_ops(driver, paths, d, worst):
    for path in paths:
        img = load(path)
        h, w = img.shape[-2:]
        requests = []
        for policy, space in SPACES.items():
            for op in OPS:
                signed = space[op][1]
                bins = BINS if h * w < 10000 else LARGE_BINS  # the 160x224 image: fewer bins, same ops
                for b in bins if space[op][0](31, h, w) is not None else [0]:
                    for sign in (1, -1) if signed else (1,):
                        out = os.path.join(d, f"{policy}_{op}_{b}_{sign}.png")
                        requests.append((policy, op, b, sign, out))
        stdin = "".join(f"{p} {o} {b} {s} {out}\n" for p, o, b, s, out in requests)
        res = subprocess.run([driver, "ops", path], input=stdin, capture_output=True, text=True, check=True)
        magnitudes = [float(x) for x in res.stdout.split()]
        worst["cases"] = (worst.get("cases", (0, 0))[0] + len(requests), 0)
        check(len(magnitudes) == len(requests), f"driver answered {len(magnitudes)} of {len(requests)} requests")
        for (policy, op, b, sign, out), got_m in zip(requests, magnitudes):
            table = SPACES[policy][op][0](31, h, w)
            want_m = 0.0 if table is None else float(table[b]) * sign
            check(got_m == want_m, f"{policy} {op} bin {b} sign {sign}: magnitude {got_m!r} != torchvision {want_m!r}")
            want = torchvision_op(img, op, want_m)
            got = load(out)
            diff = (got.int() - want.int()).abs()
            max_diff = int(diff.max())
            frac = float((diff.amax(0) > 0).float().mean())
            key = op
            prev = worst.get(key, (0, 0.0))
            worst[key] = (max(prev[0], max_diff), max(prev[1], frac))
            where = f"{os.path.basename(path)} {policy} {op} bin {b} sign {sign} (magnitude {want_m:.4g})"
            if op in GEOMETRY_OPS:
                boundary = rounding_boundary_pixels(op, want_m, h, w)
                off_boundary = int(((diff.amax(0) > 0) & ~boundary).sum())
                check(off_boundary == 0, f"{where}: {off_boundary} pixels differ away from a rounding boundary "
                                         f"({frac:.4%} of all pixels differ, {float(boundary.float().mean()):.4%} "
                                         f"lie on one)")
            else:
                check(max_diff == 0, f"{where}: max difference {max_diff} grey levels")


class FakeTorch:
    """Stands in for `torch` inside torchvision's RandomErasing.make_params: the uniforms and
    randints return the C++ side's draws (float32-rounded, as torch.empty(1) holds them)."""

    def __init__(self, attempts):
        self.attempts, self.n_uniform, self.n_randint = attempts, 0, 0

    def empty(self, *size, **kw):
        if size in ((1,), ([1],)):
            return self
        return torch.empty(*size, **kw)

    def uniform_(self, lo, hi):
        k, which = divmod(self.n_uniform, 2)
        self.n_uniform += 1
        self.n_randint = 0
        lo, hi = float(lo), float(hi)
        return torch.tensor([lo + (hi - lo) * self.attempts[k][which]], dtype=torch.float32)

    def randint(self, lo, hi, size):
        k = self.n_uniform // 2 - 1
        u = self.attempts[k][2 + self.n_randint]
        self.n_randint += 1
        return torch.tensor([lo + int(u * (hi - lo))])

    def __getattr__(self, name):
        return getattr(torch, name)


def compare_erasing(driver):
    cases = [(37, 53, 0.5, 0.02, 0.33, 0.3, 3.3), (24, 24, 1.0, 0.02, 0.33, 0.3, 3.3),
             (16, 40, 1.0, 0.3, 0.9, 0.5, 2.0), (8, 8, 1.0, 0.9, 1.0, 0.3, 3.3)]
    seeds = [str(s) for s in range(200)]
    counts = {"erased": 0, "skipped_p": 0, "no_fit": 0}
    for h, w, p, s0, s1, r0, r1 in cases:
        out = subprocess.run([driver, "erase", str(h), str(w), str(p), str(s0), str(s1), str(r0), str(r1), *seeds],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        check(len(out) == len(seeds), "erase: one line per seed")
        tr = T.RandomErasing(p=p, scale=(s0, s1), ratio=(r0, r1), value=0)
        for line in out:
            f = line.split()
            u_apply, draws = float(f[0]), [float(x) for x in f[1:41]]
            got = tuple(int(x) for x in f[41:46])
            attempts = [draws[4 * k:4 * k + 4] for k in range(10)]
            if not u_apply < p:  # torchvision: `if torch.rand(1) >= self.p: return inputs`
                want = (0, 0, 0, 0, 0)
                counts["skipped_p"] += 1
            else:
                real = tv_augment.torch
                tv_augment.torch = FakeTorch(attempts)
                try:
                    params = tr.make_params([torch.zeros(3, h, w)])
                finally:
                    tv_augment.torch = real
                erased = params["v"] is not None
                want = (1, params["i"], params["j"], params["h"], params["w"]) if erased else (0, 0, 0, 0, 0)
                counts["erased" if erased else "no_fit"] += 1
            check(got == want, f"erase {h}x{w} scale [{s0}, {s1}] ratio [{r0}, {r1}]: box {got} != torchvision {want}")
    print(f"random_erasing: boxes equal torchvision's make_params on {sum(counts.values())} draws {counts}")
    check(min(counts.values()) > 0, f"erasing cases cover erase, p-skip and no-fit: {counts}")


def compare_pipeline(driver, paths, d, worst):
    """The whole per-sample pipeline: torchvision applies the C++ plan (flip, ops) to the
    uint8 image, then ToDtype(scale) + Normalize(0.5, 0.25), then the printed erase box."""
    configs = [["rand", "2", "9"], ["rand", "3", "30"], ["wide"]]
    n = 0
    for path in paths[:2]:  # the small ones: 72 samples stay quick
        img = load(path)
        for cfg in configs:
            for seed in range(12):
                out = os.path.join(d, "pipe.f32")
                value = "zero" if seed % 2 else "random"
                res = subprocess.run([driver, "pipeline", path, out, str(seed), *cfg, "0.5", "0.5", value],
                                     capture_output=True, text=True, check=True).stdout.splitlines()
                flip = res[0].split()[1] == "1"
                x = F.horizontal_flip(img) if flip else img
                geometric = False
                for line in res[1:-1]:
                    _, op, m = line.split()
                    x = torchvision_op(x, op, float(m))
                    geometric |= op in GEOMETRY_OPS
                want = F.normalize(F.to_dtype(x, torch.float32, scale=True), [0.5] * 3, [0.25] * 3)
                box = [int(v) for v in res[-1].split()[1:]]
                got = torch.from_numpy(np.fromfile(out, dtype=np.float32)).view(3, *img.shape[-2:])
                mask = torch.zeros(img.shape[-2:], dtype=torch.bool)
                if box[0]:
                    i, j, h, w = box[1:]
                    mask[i:i + h, j:j + w] = True
                    region = got[:, mask]
                    if value == "zero":
                        check(bool((region == 0).all()), f"pipeline seed {seed}: zero erasing left non-zero values")
                    elif region.numel() >= 300:
                        check(abs(float(region.mean())) < 0.25 and 0.75 < float(region.std()) < 1.25,
                              f"pipeline seed {seed}: random erasing values not N(0, 1)-like "
                              f"(mean {float(region.mean()):.3f}, std {float(region.std()):.3f})")
                diff = (got - want).abs()[:, ~mask]
                bad = float((diff.amax(0) > 1e-6).float().mean()) if diff.numel() else 0.0
                where = f"pipeline {os.path.basename(path)} {cfg} seed {seed}"
                check(bad <= (GEOMETRY_PIXEL_FRACTION * 3 if geometric else 0.0), f"{where}: {bad:.4%} pixels differ")
                worst["pipeline"] = (max(worst.get("pipeline", (0, 0.0))[0], float(diff.max()) if diff.numel() else 0),
                                     max(worst.get("pipeline", (0, 0.0))[1], bad))
                n += 1
    print(f"pipeline: {n} samples compared with torchvision applying the same plan")


def main():
    driver = sys.argv[1]
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    worst = {}
    with tempfile.TemporaryDirectory() as d:
        paths = make_images(d)
        compare_ops(driver, paths, d, worst)
        compare_erasing(driver)
        compare_pipeline(driver, paths, d, worst)
    print("per op: max difference in grey levels, largest fraction of differing pixels")
    print(f"  {worst.pop('cases')[0]} op applications (3 small images x bins {BINS}, 160x224 x bins {LARGE_BINS}; "
          f"2 tables x 14 ops x signs)")
    for op, (m, frac) in worst.items():
        print(f"  {op:13s} max {m:8.4g}  differing {frac:.4%}")
    if failures:
        print(f"{len(failures)} comparison(s) failed")
        return 1
    print("all comparisons within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
