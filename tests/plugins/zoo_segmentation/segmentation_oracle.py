"""torchvision's segmentation models as the oracle of segmentation.so (tests/plugins/zoo_segmentation).

Runs with .venv-bench's Python (torch 2.14.1, torchvision 0.29.1): torchvision does not import
beside the project venv's torch. Every model is built as torchvision's builder builds it with
weights=None, weights_backbone=None (no download).

Every architecture is built once, with num_classes 21 (torchvision's default) and aux_loss on
where torchvision has it, and serves both the table and the fixtures (construction is most of
the time: ResNet-50's initialisation).

  segmentation_oracle.py table FILE      writes the table segmentation_table_test.cpp checks every
                                         architecture against: "<arch> <name> <d0,d1,..|-> <p|b>" for
                                         every parameter (named_parameters order), then every buffer
                                         (named_buffers order), the order visit_state lends them;
                                         "count <arch> <aux 0|1> <parameters>" with and without aux
                                         (without: less aux_classifier, the one thing torchvision's
                                         builders add for aux_loss)
  segmentation_oracle.py fixtures DIR    for each architecture: DIR/<arch>_weights.pt, the state_dict with
                                         trained-looking BatchNorm statistics as a plain dict
                                         (torch::pickle_load reads that, not an OrderedDict), and
                                         DIR/<arch>_io.pt, a plain dict: "x" [2, 3, 64, 80],
                                         "target" [2, 64, 80], "eval.out" / "eval.aux" (eval
                                         logits), "train.out" / "train.aux" (training-mode logits
                                         after torch.manual_seed(TRAIN_SEED): the heads' dropout
                                         draws), "grad.<name>" (every parameter's gradient of
                                         torchvision's reference criterion,
                                         cross_entropy(out) + 0.5 * cross_entropy(aux)) and
                                         "after.<name>" (every buffer after that forward)
  segmentation_oracle.py run TABLE TEST  the ctest entry (zoo_segmentation_oracle): checks that
                                         the committed TABLE is what torchvision gives, writes the
                                         fixtures into a fresh directory and runs the doctest binary
                                         TEST's oracle cases on them (TP_SEGMENTATION_FIXTURES);
                                         exits with its status
"""
import os
import pathlib
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torchvision.models import segmentation

# The table's shape notation and the BatchNorm randomisation are the classification zoo oracle's.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "zoo_efficientnet"))
from efficientnet_oracle import randomise_norms, shape  # noqa: E402

ARCHS = ["fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
TRAIN_SEED = 77  # segmentation_oracle_test.cpp's kTrainSeed


def has_aux(arch):
    return not arch.startswith("lraspp")


def models():
    """(arch, model) per architecture, num_classes 21, aux on where it exists, seeded 200 + i."""
    for i, arch in enumerate(ARCHS):
        torch.manual_seed(200 + i)
        kwargs = {"aux_loss": True} if has_aux(arch) else {}
        yield arch, getattr(segmentation, arch)(weights=None, weights_backbone=None, num_classes=21, **kwargs)


def table_lines(arch, model):
    lines = [f"{arch} {name} {shape(p)} p" for name, p in model.named_parameters()]
    lines += [f"{arch} {name} {shape(b)} b" for name, b in model.named_buffers()]
    total = sum(p.numel() for p in model.parameters())
    aux = sum(p.numel() for name, p in model.named_parameters() if name.startswith("aux_classifier."))
    lines.append(f"count {arch} 0 {total - aux}")
    if has_aux(arch):
        lines.append(f"count {arch} 1 {total}")
    return lines


def fixtures(arch, model, directory):
    randomise_norms(model)
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, directory / f"{arch}_weights.pt")
    x = torch.randn(2, 3, 64, 80)
    target = torch.randint(0, 21, (2, 64, 80))
    out = {"x": x, "target": target}
    with torch.no_grad():
        out.update({f"eval.{k}": v for k, v in model.eval()(x).items()})
    model.train()
    torch.manual_seed(TRAIN_SEED)
    train = model(x)
    out.update({f"train.{k}": v.detach().clone() for k, v in train.items()})
    loss = F.cross_entropy(train["out"], target)
    if "aux" in train:
        loss = loss + 0.5 * F.cross_entropy(train["aux"], target)
    loss.backward()
    out.update({"grad." + k: p.grad.clone() for k, p in model.named_parameters()})
    out.update({"after." + k: v.clone() for k, v in model.named_buffers()})
    torch.save(out, directory / f"{arch}_io.pt")


def run(table, test_binary):
    committed = pathlib.Path(table).read_text().splitlines()
    with tempfile.TemporaryDirectory(prefix="zoo_segmentation_") as directory:
        lines = []
        for arch, model in models():
            lines += table_lines(arch, model)
            fixtures(arch, model, pathlib.Path(directory))
        if committed != lines:
            print(f"FAIL: {table} differs from torchvision's (regenerate: segmentation_oracle.py table {table})")
            return 1
        print(f"table: {len(committed)} lines equal torchvision's")
        env = dict(os.environ, TP_SEGMENTATION_FIXTURES=directory)
        return subprocess.call([test_binary, "--no-skip", "--test-case=*torchvision oracle*"], env=env)


if __name__ == "__main__":
    if sys.argv[1] == "table":
        pathlib.Path(sys.argv[2]).write_text("\n".join(sum((table_lines(*m) for m in models()), [])) + "\n")
    elif sys.argv[1] == "fixtures":
        for arch, model in models():
            fixtures(arch, model, pathlib.Path(sys.argv[2]))
    else:
        sys.exit(run(sys.argv[2], sys.argv[3]))
