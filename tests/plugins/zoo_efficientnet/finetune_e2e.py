"""configs/finetune_efficientnet_b0.toml end to end in the real host (ctest zoo_efficientnet_finetune).

Runs with .venv-bench's Python (torchvision 0.29.1). Writes, into a fresh directory under the
build tree, torchvision's EfficientNet-B0 weights (1000 classes, its own initialisation: no
network, so not the ImageNet ones, which load the same way) with torch.save(model.state_dict()),
exactly as a user saves them, and a small class-folder dataset (3 classes of coloured-disc PNGs);
then runs the shipped config on them shrunk to seconds (64x64 images, batch 4, 3 steps) with a
3-class head. Checks: exit 0; the log says every tensor but the two of the classifier came from
the file (`train.init_weights_ignore = ["classifier.*"]`) and names the layer-decay groups; the
checkpoint has a [3, 1280] classifier, BatchNorm counted 3 steps on top of the loaded 0, and its
stem convolution is torchvision's to within what 3 AdamW steps at the stem's decayed lr can move
(1e-3: a model that had kept its own init would differ by ~0.1).
Usage: finetune_e2e.py BUILD_DIR SOURCE_DIR
"""
import os
import pathlib
import shutil
import subprocess
import sys

import torch
import torchvision
from PIL import Image, ImageDraw


def write_folder(root, per_class):
    colours = [(220, 40, 40), (40, 200, 40), (40, 60, 220)]
    for c, colour in enumerate(colours):
        d = root / f"class_{c}"
        d.mkdir(parents=True)
        for i in range(per_class):
            img = Image.new("RGB", (72, 80), (30 + 3 * i, 30, 30))
            ImageDraw.Draw(img).ellipse((8 + i % 20, 10, 48 + i % 20, 50), fill=colour)
            img.save(d / f"{i:03d}.png")


def main():
    build, source = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    work = build / "test-runs" / "finetune_efficientnet_b0"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0()  # 1000 classes, as the ImageNet file
    weights = work / "efficientnet_b0_torchvision.pt"
    torch.save(model.state_dict(), weights)
    write_folder(work / "data" / "train", 12)
    write_folder(work / "data" / "val", 4)
    run_dir = work / "run"
    command = [
        str(build / "bin" / "host"), "--config", str(source / "configs" / "finetune_efficientnet_b0.toml"),
        "--output-dir", str(run_dir),
        "--set", f'train.init_weights="{weights}"',
        "--set", f'data.train.root="{work / "data" / "train"}"',
        "--set", f'data.train.val_root="{work / "data" / "val"}"',
        "--set", "model.num_classes=3", "--set", "train.max_steps=3", "--set", "train.batch_size=4",
        "--set", "data.num_workers=0", "--set", "data.train.random_resized_crop=[64]",
        "--set", "data.train.resize=[72]", "--set", "data.train.center_crop=[64]",
        "--set", "schedule.warmup_steps=1", "--set", 'progress.mode="off"', "--set", "run.threads=1",
    ]
    out = subprocess.run(command, capture_output=True, text=True)
    text = out.stdout + out.stderr
    failures = []
    if out.returncode != 0:
        failures.append(f"host exited {out.returncode}")
    n = len(model.state_dict())
    want = (f"{n - 2} tensors loaded; the model's own init kept for 2 (classifier.1.weight, classifier.1.bias); "
            "2 entries of the file left out")
    if want not in text:
        failures.append(f"the log does not say: {want}")
    if "optim.layer_decay = 0.8: " not in text:
        failures.append("the log names no layer-decay groups")
    last = run_dir / "checkpoints" / "last.pt"
    if last.exists():
        saved = torch.load(last, weights_only=True)["model"]
        if saved["classifier.1.weight"].shape != (3, 1280):
            failures.append(f"classifier shape {tuple(saved['classifier.1.weight'].shape)}")
        tracked = int(saved["features.1.0.block.0.1.num_batches_tracked"])
        if tracked != 3:
            failures.append(f"num_batches_tracked {tracked}, expected 3 steps from the loaded 0")
        moved = (saved["features.0.0.weight"] - model.state_dict()["features.0.0.weight"]).abs().max().item()
        print(f"finetune_e2e: stem weight moved by at most {moved:.3g} from torchvision's")
        if moved > 1e-3:
            failures.append(f"the stem is {moved} away from the loaded weights")
    else:
        failures.append("no checkpoints/last.pt")
    print(text[-3000:])
    for f in failures:
        print("FAIL:", f)
    print(f"finetune_e2e: {n} tensors in torchvision's state_dict, {len(failures)} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
