"""Fine-tuning EfficientNet-B0 from torchvision-format weights: the host against a Python fine-tune
with the same settings (issue 18, docs/model_zoo.md "Fine-tuning").

  .venv-bench/bin/python bench/finetune/run.py [BUILD_DIR] [--seeds 0,1] [--epochs 6] [--work DIR]

1. Source weights: torchvision's efficientnet_b0 (10 classes) trained in Python on a synthetic
   10-class image folder, saved with torch.save(model.state_dict()): the torchvision format a user
   gets from `torchvision.models.efficientnet_b0(weights=...).state_dict()`. (This machine cannot
   download the ImageNet weights; the path is the same.)
2. Target task: another synthetic image folder, 3 classes (3 x 64 training, 3 x 40 val images).
3. The host fine-tunes with configs/finetune_efficientnet_b0.toml (AdamW 1e-3, weight decay 0.05 on
   dim >= 2, layer decay 0.8 over the model's declared depths, warmup then cosine to 1e-6, label
   smoothing 0.1, random resized crop + hflip, ImageNet normalisation; train.init_weights with
   init_weights_ignore = ["classifier.*"]), crops of 64 instead of 224 and num_classes = 3.
4. Python fine-tunes torchvision's model from the same file with the same recipe, written out
   (layer decay with the same depths, the same warmup-cosine, torchvision.transforms.v2).

Prints each side's final and best val accuracy per seed and their means. The two sides draw
different random numbers (augmentation, dropout, shuffling), so single runs differ by noise;
compare the means.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision.transforms import v2 as T

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CROP, RESIZE = 64, 72
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def draw(kind, rng, size=80):
    """One synthetic RGB image: a textured background with an object whose kind is the class."""
    img = (rng.random((size, size, 3)) * 70 + rng.random(3) * 60).astype(np.float32)
    y, x = np.mgrid[0:size, 0:size]
    cx, cy, r = rng.uniform(25, 55), rng.uniform(25, 55), rng.uniform(10, 20)
    colour = rng.uniform(120, 255, 3)
    period = rng.uniform(6, 12)
    masks = {
        "disc": (x - cx) ** 2 + (y - cy) ** 2 < r * r,
        "square": (abs(x - cx) < r) & (abs(y - cy) < r),
        "ring": abs(np.hypot(x - cx, y - cy) - r) < 3,
        "hstripes": (y // (period / 2)) % 2 == 0,
        "vstripes": (x // (period / 2)) % 2 == 0,
        "diagonal": ((x + y) // (period / 2)) % 2 == 0,
        "cross": (abs(x - cx) < 3) | (abs(y - cy) < 3),
        "triangle": (y - cy > -r) & (abs(x - cx) < (y - cy + r) / 2) & (y - cy < r),
        "dots": ((x % period) - period / 2) ** 2 + ((y % period) - period / 2) ** 2 < (period / 4) ** 2,
        "checker": ((x // period) + (y // period)) % 2 == 0,
    }
    img[masks[kind]] = colour
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def write_folder(root, kinds, per_class, seed):
    rng = np.random.default_rng(seed)
    for label, kind in enumerate(kinds):
        os.makedirs(os.path.join(root, kind), exist_ok=True)
        for i in range(per_class):
            draw(kind, rng).save(os.path.join(root, kind, f"{i:04d}.png"))


def loaders(train_root, val_root, batch, seed):
    train_tf = T.Compose([T.ToImage(), T.RandomResizedCrop(CROP, antialias=True), T.RandomHorizontalFlip(),
                          T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])
    val_tf = T.Compose([T.ToImage(), T.Resize(RESIZE, antialias=True), T.CenterCrop(CROP),
                        T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])
    train = torchvision.datasets.ImageFolder(train_root, train_tf)
    val = torchvision.datasets.ImageFolder(val_root, val_tf)
    g = torch.Generator().manual_seed(seed)
    return (torch.utils.data.DataLoader(train, batch, shuffle=True, drop_last=True, generator=g, num_workers=1),
            torch.utils.data.DataLoader(val, 64, num_workers=1))


def evaluate(model, loader):
    model.eval()
    right = total = 0
    with torch.inference_mode():
        for x, y in loader:
            right += int((model(x).argmax(1) == y).sum())
            total += len(y)
    model.train()
    return right / total


def pretrain(train_root, val_root, out, epochs):
    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(num_classes=10)
    train, val = loaders(train_root, val_root, 32, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    for epoch in range(epochs):
        for x, y in train:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"  source epoch {epoch + 1}: val accuracy {evaluate(model, val):.3f}", flush=True)
    torch.save(model.state_dict(), out)


def layer_depths(model):
    """The host plugin's declared depths (efficientnet_net.cpp layer_depths): features.0 at 0, each
    MBConv block features.<s>.<b> one deeper in order, features.8 after them; the rest (the
    classifier) is the head, one past the deepest."""
    prefixes = [("features.0", 0)]
    depth = 1
    for s in range(1, 8):
        for b in range(len(model.features[s])):
            prefixes.append((f"features.{s}.{b}", depth))
            depth += 1
    prefixes.append(("features.8", depth))
    head = depth + 1

    def of(name):
        best, length = head, -1
        for prefix, d in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > length:
                best, length = d, len(prefix)
        return best
    return of, head


def python_finetune(weights, train_root, val_root, epochs, seed, batch, warmup):
    torch.manual_seed(seed)
    model = torchvision.models.efficientnet_b0(num_classes=3)
    state = torch.load(weights)
    kept = {k: v for k, v in state.items() if not k.startswith("classifier.")}
    missing, unexpected = model.load_state_dict(kept, strict=False)
    assert not unexpected and all(k.startswith("classifier.") for k in missing), (missing, unexpected)
    of, head = layer_depths(model)
    groups = {}
    for name, p in model.named_parameters():
        scale = 0.8 ** (head - of(name))
        decay = 0.05 if p.ndim >= 2 else 0.0
        groups.setdefault((scale, decay), []).append(p)
    opt = torch.optim.AdamW([{"params": ps, "lr": 1e-3 * s, "weight_decay": d, "scale": s}
                             for (s, d), ps in groups.items()], lr=1e-3)
    train, val = loaders(train_root, val_root, batch, seed)
    total = epochs * len(train)
    base = [g["lr"] for g in opt.param_groups]

    def lr_at(step, b):  # docs/schedules.md cosine: linear warmup from 0, then cosine to min_lr
        m = 1e-6 * b / 1e-3
        if step < warmup:
            return b * step / warmup
        t = step - warmup
        return m + (b - m) * (1 + math.cos(math.pi * t / (total - warmup))) / 2

    step, best, last = 0, 0.0, 0.0
    for epoch in range(epochs):
        for x, y in train:
            for g, b in zip(opt.param_groups, base):
                g["lr"] = lr_at(step, b)
            loss = torch.nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        last = evaluate(model, val)
        best = max(best, last)
    return last, best


def host_finetune(build, weights, train_root, val_root, epochs, seed, batch, warmup, out):
    cmd = [os.path.join(build, "bin", "host"), "--config", os.path.join(ROOT, "configs/finetune_efficientnet_b0.toml"),
           "--output-dir", out, "--set", f'data.train.root="{train_root}"', "--set", f'data.train.val_root="{val_root}"',
           "--set", f'train.init_weights="{weights}"', "--set", "model.num_classes=3",
           "--set", f"data.train.random_resized_crop=[{CROP}]", "--set", f"data.train.resize=[{RESIZE}]",
           "--set", f"data.train.center_crop=[{CROP}]", "--set", f"train.batch_size={batch}",
           "--set", f"train.epochs={epochs}", "--set", f"schedule.warmup_steps={warmup}", "--set", f"run.seed={seed}",
           "--set", 'run.device="cpu"', "--set", "run.channels_last=false", "--set", "data.num_workers=1",
           "--set", 'progress.mode="off"', "--set", "plots.enabled=false", "--set", "checkpoint.load_best_at_end=false"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = [json.loads(line) for line in open(os.path.join(out, "history.jsonl"))]
    accuracies = [r["val/accuracy"] for r in records if "val/accuracy" in r]
    return accuracies[-1], max(accuracies)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--source-epochs", type=int, default=3)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    work = args.work or tempfile.mkdtemp(prefix="finetune_bench_")
    src, dst = os.path.join(work, "source"), os.path.join(work, "target")
    kinds_src = ["disc", "square", "ring", "hstripes", "vstripes", "diagonal", "cross", "triangle", "dots", "checker"]
    if not os.path.isdir(src):
        write_folder(os.path.join(src, "train"), kinds_src, 150, 1)
        write_folder(os.path.join(src, "val"), kinds_src, 30, 2)
        # The target task: 3 of the source's objects, new draws, far fewer images per class.
        write_folder(os.path.join(dst, "train"), ["square", "cross", "dots"], 64, 3)
        write_folder(os.path.join(dst, "val"), ["square", "cross", "dots"], 40, 4)
    weights = os.path.join(work, "efficientnet_b0_source.pt")
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}; work directory {work}")
    if not os.path.exists(weights):
        start = time.time()
        pretrain(os.path.join(src, "train"), os.path.join(src, "val"), weights, args.source_epochs)
        print(f"  source weights: {weights} ({time.time() - start:.0f} s)")
    batch, warmup = 32, 10
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        start = time.time()
        h = host_finetune(args.build, weights, os.path.join(dst, "train"), os.path.join(dst, "val"), args.epochs, seed,
                          batch, warmup, os.path.join(work, f"host_seed{seed}"))
        host_s = time.time() - start
        start = time.time()
        p = python_finetune(weights, os.path.join(dst, "train"), os.path.join(dst, "val"), args.epochs, seed, batch,
                            warmup)
        python_s = time.time() - start
        rows.append((seed, h, p))
        print(f"seed {seed}: host final {h[0]:.3f} best {h[1]:.3f} ({host_s:.0f} s) | "
              f"python final {p[0]:.3f} best {p[1]:.3f} ({python_s:.0f} s)", flush=True)
    mean = lambda xs: sum(xs) / len(xs)
    print(f"mean over {len(rows)} seeds: host final {mean([r[1][0] for r in rows]):.3f} best "
          f"{mean([r[1][1] for r in rows]):.3f} | python final {mean([r[2][0] for r in rows]):.3f} best "
          f"{mean([r[2][1] for r in rows]):.3f}")


if __name__ == "__main__":
    sys.exit(main())
