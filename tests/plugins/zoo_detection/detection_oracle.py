"""torchvision's FCOS as the oracle of detection.so (tests/plugins/zoo_detection).

Runs with .venv-bench's Python (torch 2.14.1, torchvision 0.29.1): torchvision does not import
beside the project venv's torch. Models are built with weights=None, weights_backbone=None (no
download), BatchNorm2d in the backbone as torchvision does without pretrained weights.

CONFIGS are org.torchhost.fcos configs: "resnet50" is fcos_resnet50_fpn itself; the others are
torchvision's FCOS on _resnet_fpn_extractor(resnet18 / resnet34, returned_layers [2, 3, 4],
LastLevelP6P7), "small" with a 64-channel pyramid (BackboneWithFPN, the extractor's own class,
since the extractor fixes 256) and a 2-conv head.

  detection_oracle.py table FILE     writes the table detection_test.cpp checks every config
                                     against: "<config> <name> <d0,d1,..|-> <p|b>" for every
                                     parameter (named_parameters order), then every buffer, the
                                     order visit_state lends them; "count <config> <parameters>"
  detection_oracle.py fixtures DIR   for each of ORACLE: DIR/<config>_weights.pt, the state_dict
                                     with trained-looking BatchNorm statistics and a head whose
                                     scores and boxes spread (so eval keeps many detections and NMS
                                     suppresses some), as a plain dict; DIR/<config>_io.pt, a plain
                                     dict: "x" the images zero-padded to the largest [3, 3, H, W],
                                     "image_lengths" [3, 3], "orig_size" [3, 2], "boxes" / "labels"
                                     ragged with "boxes_offsets" (image 1 has none), the eval
                                     head outputs "eval.<output>", "anchors", the detections
                                     "det.boxes" / "det.scores" / "det.labels" / "det.offsets"
                                     (torchvision's transform.postprocess to orig_size), the
                                     training head outputs "train.<output>", the losses
                                     "loss.<term>" and "grad.<name>" of GRADIENTS for the sum of
                                     torchvision's loss dict; "nms.*", batched_nms on random boxes
                                     through both of its paths
  detection_oracle.py run TABLE TEST the ctest entry (zoo_detection_oracle): checks that the
                                     committed TABLE is what torchvision gives, writes the fixtures
                                     into a fresh directory and runs the doctest binary TEST's
                                     oracle cases on them (TP_DETECTION_FIXTURES); exits with its
                                     status

The model sees the images as they are: torchvision's transform is told not to normalise or
resize (the dataset does both for org.torchhost.fcos), so only its batching (pad to a multiple
of 32) and its post-processing run.
"""
import os
import pathlib
import subprocess
import sys
import tempfile

import torch
from torch import nn
from torchvision.models import resnet
from torchvision.models.detection import fcos
from torchvision.models.detection.backbone_utils import BackboneWithFPN, _resnet_fpn_extractor
from torchvision.ops import boxes as box_ops
from torchvision.ops.feature_pyramid_network import LastLevelP6P7

# The table's shape notation and the BatchNorm randomisation are the classification zoo oracle's.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "zoo_efficientnet"))
from efficientnet_oracle import randomise_norms, shape  # noqa: E402

# detection_support.h's configs: backbone, num_classes, fpn_channels, head_convs.
CONFIGS = {
    "resnet50": ("resnet50", 91, 256, 4),
    "resnet34": ("resnet34", 91, 256, 4),
    "resnet18": ("resnet18", 91, 256, 4),
    "small": ("resnet18", 5, 64, 2),
}
ORACLE = ["resnet50", "small"]
# Post-processing for the oracle case (detection_oracle_test.cpp's oracle_config): torchvision's
# defaults but smaller cuts, so both cuts act on the few images here; with 250 candidates per level
# resnet50 reaches batched_nms's per-class path (over 1,000 boxes), small its coordinate trick.
POSTPROCESS = {"score_thresh": 0.3, "nms_thresh": 0.6, "detections_per_img": 60, "topk_candidates": 250}
# (height, width) of the three images and their sizes before the "dataset" resized them.
SIZES = [(150, 190), (96, 130), (190, 140)]
ORIG_SIZES = [(300, 380), (96, 130), (475, 350)]
GRADIENTS = ["backbone.body.conv1.weight", "backbone.body.layer1.0.bn1.weight", "backbone.body.layer4.1.conv2.weight",
             "backbone.fpn.inner_blocks.0.0.weight", "backbone.fpn.layer_blocks.2.0.bias",
             "backbone.fpn.extra_blocks.p7.weight", "head.classification_head.conv.0.weight",
             "head.classification_head.conv.1.weight", "head.classification_head.cls_logits.weight",
             "head.classification_head.cls_logits.bias", "head.regression_head.conv.1.bias",
             "head.regression_head.bbox_reg.weight", "head.regression_head.bbox_ctrness.weight",
             "head.regression_head.bbox_ctrness.bias"]


def build(backbone, num_classes, fpn_channels, head_convs, **kwargs):
    if (backbone, fpn_channels, head_convs) == ("resnet50", 256, 4):
        return fcos.fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=num_classes, **kwargs)
    body = getattr(resnet, backbone)(weights=None, norm_layer=nn.BatchNorm2d)
    if fpn_channels == 256:
        trunk = _resnet_fpn_extractor(body, 5, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
    else:
        c2 = body.inplanes // 8
        trunk = BackboneWithFPN(body, {"layer2": "0", "layer3": "1", "layer4": "2"}, [c2 * 2, c2 * 4, c2 * 8],
                                fpn_channels, extra_blocks=LastLevelP6P7(fpn_channels, fpn_channels))
    head = fcos.FCOSHead(fpn_channels, 1, num_classes, num_convs=head_convs)
    return fcos.FCOS(trunk, num_classes, head=head, **kwargs)


def models(names, **kwargs):
    """(name, model) per config, seeded 300 + its index in CONFIGS."""
    for i, name in enumerate(CONFIGS):
        if name in names:
            torch.manual_seed(300 + i)
            yield name, build(*CONFIGS[name], **kwargs)


def table_lines(name, model):
    lines = [f"{name} {k} {shape(p)} p" for k, p in model.named_parameters()]
    lines += [f"{name} {k} {shape(b)} b" for k, b in model.named_buffers()]
    lines.append(f"count {name} {sum(p.numel() for p in model.parameters())}")
    return lines


def randomise_head(model):
    """Scores and boxes that spread: class biases around the threshold, boxes of one to a few
    anchor sizes (so neighbouring locations overlap and NMS acts), centre-ness around 0.5."""
    with torch.no_grad():
        for m in model.head.modules():
            if isinstance(m, nn.GroupNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
        cls = model.head.classification_head.cls_logits
        cls.weight.normal_(0.0, 0.03)
        cls.bias.normal_(-0.5, 1.0)
        reg = model.head.regression_head
        reg.bbox_reg.weight.normal_(0.0, 0.03)
        reg.bbox_reg.bias.uniform_(0.4, 2.0)
        reg.bbox_ctrness.weight.normal_(0.0, 0.03)
        reg.bbox_ctrness.bias.normal_(0.0, 0.5)


def identity_transform(model):
    """The dataset normalises and resizes for org.torchhost.fcos; torchvision's transform only
    batches here, and post-processes to ORIG_SIZES as if they were the images' sizes before it."""
    t = model.transform
    t.normalize = lambda image: image
    t.resize = lambda image, target=None: (image, target)
    postprocess = t.postprocess
    t.postprocess = lambda result, image_shapes, _original: postprocess(result, image_shapes, ORIG_SIZES)


def inputs(num_classes):
    generator = torch.Generator().manual_seed(5)
    images = [torch.randn(3, h, w, generator=generator) for h, w in SIZES]
    x = torch.zeros(len(SIZES), 3, max(h for h, _ in SIZES), max(w for _, w in SIZES))
    for i, img in enumerate(images):
        x[i, :, : img.shape[1], : img.shape[2]] = img
    targets = []
    for i, (h, w) in enumerate(SIZES):
        n = 0 if i == 1 else 6
        # Boxes from 12 pixels to most of the image, so several levels get foreground.
        wh = torch.rand(n, 2, generator=generator) * torch.tensor([w - 12.0, h - 12.0]) + 12
        xy = torch.rand(n, 2, generator=generator) * (torch.tensor([float(w), float(h)]) - wh)
        boxes = torch.cat([xy, xy + wh], 1)
        labels = torch.randint(0, num_classes, (n,), generator=generator)
        targets.append({"boxes": boxes, "labels": labels})
    return images, x, targets


def head_hook(model, store):
    def hook(_module, _inputs, outputs):
        store.update({k: v.detach().clone() for k, v in outputs.items()})
    return model.head.register_forward_hook(hook)


def fixtures(name, model, directory):
    randomise_norms(model)
    randomise_head(model)
    identity_transform(model)
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, directory / f"{name}_weights.pt")
    images, x, targets = inputs(model.head.classification_head.num_classes)
    out = {"x": x, "image_lengths": torch.tensor([[3, h, w] for h, w in SIZES]),
           "orig_size": torch.tensor(ORIG_SIZES), "boxes": torch.cat([t["boxes"] for t in targets]),
           "labels": torch.cat([t["labels"] for t in targets]),
           "boxes_offsets": torch.tensor([0] + [len(t["boxes"]) for t in targets]).cumsum(0)}
    head = {}
    handle = head_hook(model, head)
    anchors = []
    model.anchor_generator.register_forward_hook(lambda _m, _i, o: anchors.append(o[0].clone()))
    model.eval()
    with torch.no_grad():
        detections = model(images)
    out.update({f"eval.{k}": v for k, v in head.items()})
    out["anchors"] = anchors[0]
    out["det.boxes"] = torch.cat([d["boxes"] for d in detections])
    out["det.scores"] = torch.cat([d["scores"] for d in detections])
    out["det.labels"] = torch.cat([d["labels"] for d in detections])
    out["det.offsets"] = torch.tensor([0] + [len(d["scores"]) for d in detections]).cumsum(0)
    model.train()
    losses = model(images, targets)
    handle.remove()
    out.update({f"train.{k}": v for k, v in head.items()})
    out.update({f"loss.{k}": v.detach().clone() for k, v in losses.items()})
    sum(losses.values()).backward()
    parameters = dict(model.named_parameters())
    out.update({f"grad.{k}": parameters[k].grad.clone() for k in GRADIENTS})
    torch.save(out, directory / f"{name}_io.pt")
    return [len(d["scores"]) for d in detections]


def nms_fixture(directory):
    """batched_nms through both paths: 300 boxes (coordinate trick) and 1500 (one nms per class)."""
    generator = torch.Generator().manual_seed(9)
    out = {}
    for n in (300, 1500):
        xy = torch.rand(n, 2, generator=generator) * 200
        boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=generator) * 60 + 1], 1)
        scores = torch.rand(n, generator=generator)
        idxs = torch.randint(0, 7, (n,), generator=generator)
        out.update({f"nms.{n}.boxes": boxes, f"nms.{n}.scores": scores, f"nms.{n}.idxs": idxs,
                    f"nms.{n}.keep": box_ops.batched_nms(boxes, scores, idxs, 0.5),
                    f"nms.{n}.plain": box_ops.nms(boxes, scores, 0.5)})
    torch.save(out, directory / "nms.pt")


def run(table, test_binary):
    committed = pathlib.Path(table).read_text().splitlines()
    lines = sum((table_lines(*m) for m in models(CONFIGS)), [])
    if committed != lines:
        print(f"FAIL: {table} differs from torchvision's (regenerate: detection_oracle.py table {table})")
        return 1
    print(f"table: {len(committed)} lines equal torchvision's")
    with tempfile.TemporaryDirectory(prefix="zoo_detection_") as directory:
        for name, model in models(ORACLE, **POSTPROCESS):
            counts = fixtures(name, model, pathlib.Path(directory))
            print(f"{name}: torchvision keeps {counts} detections")
        nms_fixture(pathlib.Path(directory))
        env = dict(os.environ, TP_DETECTION_FIXTURES=directory)
        return subprocess.call([test_binary, "--no-skip", "--test-case=*torchvision oracle*"], env=env)


if __name__ == "__main__":
    if sys.argv[1] == "table":
        pathlib.Path(sys.argv[2]).write_text("\n".join(sum((table_lines(*m) for m in models(CONFIGS)), [])) + "\n")
    elif sys.argv[1] == "fixtures":
        pathlib.Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        for name, model in models(ORACLE, **POSTPROCESS):
            print(name, fixtures(name, model, pathlib.Path(sys.argv[2])))
        nms_fixture(pathlib.Path(sys.argv[2]))
    else:
        sys.exit(run(sys.argv[2], sys.argv[3]))
