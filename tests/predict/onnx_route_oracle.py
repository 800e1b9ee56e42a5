"""The documented route from a trained run to the Python world (docs/deployment.md, "Python and
ONNX"), end to end with the named pair (torch 2.14.1, torchvision 0.29.1, onnxscript 0.7.2,
onnx 1.23.2, onnxruntime 1.32.0 in .venv-bench):

  host train (org.torchhost.resnet depth 18 on image_folder PNGs)
  -> host export --format safetensors
  -> its metadata: the model's options, the class names, the evaluation preprocessing
  -> torchvision.models.resnet18(num_classes=3).load_state_dict(strict=True)
  -> torch.onnx.export(dynamo=True, a dynamic batch)
  -> onnxruntime (CPU)

and checks that torchvision's eager logits and ONNX Runtime's equal `host predict`'s on the same
validation images within kRelativeTolerance, with the same predicted classes, at two batch sizes.
The images are PNGs at the network's input size, so the only preprocessing is image_folder's
`(v / 255 - mean) / std`, which Python reproduces exactly; a JPEG or a resize would bring the
decoder's and the interpolation's differences, which docs/deployment.md's parity rule covers.

Usage: onnx_route_oracle.py <host executable> <work directory>
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

try:
    import onnxruntime
    import torch
    import torchvision
    from PIL import Image
    from safetensors import safe_open
    from safetensors.torch import load_file
except ImportError as error:  # an older .venv-bench, made before the ONNX packages joined it
    sys.exit(f"onnx_route_oracle: {error}; run scripts/bench_setup (it adds onnx, onnxscript and onnxruntime)")

# Of the largest logit's magnitude. Measured: torchvision's eager logits equal the host's bit for
# bit; ONNX Runtime's (its own kernels) differ by 3.05e-5 with logits up to 72, 4e-7 of it, a few
# float32 steps. A wrong weight, layer, normalisation or channel order moves them by far more.
kRelativeTolerance = 1e-5
kClasses = ["circle", "square", "triangle"]
kSize = 48
kMean = [0.485, 0.456, 0.406]
kStd = [0.229, 0.224, 0.225]


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"onnx_route_oracle: {' '.join(map(str, command))} exited {done.returncode}:\n"
                 f"{done.stdout}\n{done.stderr}")
    return done.stdout


def write_images(root, per_class, seed):
    """Class folders of smooth, class-coloured RGB PNGs with noise, kSize x kSize."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, kSize, dtype=np.float32)
    for class_id, name in enumerate(kClasses):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            base = np.zeros((kSize, kSize, 3), np.float32)
            base[..., class_id] = np.outer(ramp, ramp[::-1]) * 200
            pixels = np.clip(base + rng.normal(0, 30, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "RGB").save(root / name / f"{i:03d}.png")


def write_config(work):
    mean, std = ", ".join(map(str, kMean)), ", ".join(map(str, kStd))
    config = work / "run.toml"
    config.write_text(f"""
[run]
name = "onnx_route"
output_dir = "{work / 'run'}"
seed = 7
device = "cpu"

[train]
epochs = 1
batch_size = 6

[optim]
name = "sgd"
lr = 0.05

[data]
num_workers = 0

[data.train]
component = "org.torchhost.image_folder"
root = "{work / 'data' / 'train'}"
val_root = "{work / 'data' / 'val'}"
hflip = 0.5
mean = [{mean}]
std = [{std}]

[model]
component = "org.torchhost.resnet"
depth = 18
num_classes = {len(kClasses)}

[loss]
component = "org.torchhost.cross_entropy"

[[metrics]]
component = "org.torchhost.accuracy"

[progress]
mode = "off"
""")
    return config


def validation_batch(val_root, classes, mean, std):
    """image_folder's val samples in its order (class folders in id order, sorted files), normalised."""
    files = [f for name in classes for f in sorted((val_root / name).iterdir())]
    pixels = np.stack([np.asarray(Image.open(f).convert("RGB"), np.float32) for f in files])
    images = (pixels / 255 - np.array(mean, np.float32)) / np.array(std, np.float32)
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32))


def check_close(name, logits, host_logits):
    gap = float(np.abs(logits - host_logits).max())
    bound = kRelativeTolerance * float(np.abs(host_logits).max())
    print(f"onnx_route_oracle: {name}: max |logit - host predict's| = {gap:.2e} (bound {bound:.2e})")
    if not gap <= bound:
        sys.exit(f"onnx_route_oracle: {name} differs from host predict by {gap}")
    if not np.array_equal(logits.argmax(1), host_logits.argmax(1)):
        sys.exit(f"onnx_route_oracle: {name} predicts other classes than host predict")


def main():
    host, work = Path(sys.argv[1]), Path(sys.argv[2])
    subprocess.run(["rm", "-rf", str(work)], check=True)
    write_images(work / "data" / "train", per_class=6, seed=1)
    write_images(work / "data" / "val", per_class=4, seed=2)
    config = write_config(work)

    run([host, "--config", config])
    checkpoint = work / "run" / "checkpoints" / "last.pt"
    exported = work / "resnet18.safetensors"
    run([host, "export", "--checkpoint", checkpoint, "--weights", "live", "--format", "safetensors",
         "--output", exported])
    predictions = work / "predictions.npy"
    run([host, "predict", "--config", work / "run" / "config.toml", "--checkpoint", "last", "--weights", "live",
         "--format", "npy", "--output", predictions])
    rows = np.load(predictions)
    host_logits = rows["logits"][np.argsort(rows["index"])].astype(np.float32)

    # What deployment needs comes from the export alone (docs/deployment.md, section 1).
    with safe_open(str(exported), "pt") as f:
        metadata = f.metadata()
    classes = json.loads(metadata["torchhost.classes"])
    options = json.loads(metadata["torchhost.model"])["options"]
    preprocessing = json.loads(metadata["torchhost.preprocessing"])["options"]
    if classes != sorted(kClasses) or options["depth"] != 18 or options["num_classes"] != len(kClasses):
        sys.exit(f"onnx_route_oracle: the export's metadata says classes {classes}, model {options}")
    if preprocessing["mean"] != kMean or preprocessing["std"] != kStd:
        sys.exit(f"onnx_route_oracle: the export's preprocessing is {preprocessing}")

    model = getattr(torchvision.models, f"resnet{options['depth']}")(num_classes=options["num_classes"])
    model.load_state_dict(load_file(str(exported)), strict=True)  # every tensor by name and shape
    model.eval()
    images = validation_batch(work / "data" / "val", classes, preprocessing["mean"], preprocessing["std"])
    if images.shape[0] != host_logits.shape[0]:
        sys.exit(f"onnx_route_oracle: {images.shape[0]} val images, {host_logits.shape[0]} predictions")
    with torch.no_grad():
        check_close(f"torchvision {torchvision.__version__} eager", model(images).numpy(), host_logits)

    onnx_file = work / "resnet18.onnx"
    batch = torch.export.Dim("batch")
    torch.onnx.export(model, (images[:2],), str(onnx_file), dynamo=True, input_names=["images"],
                      output_names=["logits"], dynamic_shapes={"x": {0: batch}})
    session = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    for size in (1, images.shape[0]):  # a dynamic batch: one image, and all of them at once
        logits = np.concatenate([session.run(None, {"images": images[i:i + size].numpy()})[0]
                                 for i in range(0, images.shape[0], size)])
        check_close(f"onnxruntime {onnxruntime.__version__}, batch {size}", logits, host_logits)
    print(f"onnx_route_oracle: ok (torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"{images.shape[0]} images)")


if __name__ == "__main__":
    main()
