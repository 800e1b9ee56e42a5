"""torchvision oracle for coco_detection.

Writes a small COCO set (PNG and JPEG images of several sizes and aspect ratios, crowd, clamped,
degenerate and tiny boxes, an image without annotations, one with only a crowd, one with only
tiny boxes, non-contiguous category ids), runs coco_driver (C++: the built coco_detection.so
through its C ABI, printing each sample's drawn parameters) and replays every sample with
torchvision 0.29's detection recipe pieces on the same parameters:

  * targets: pycocotools' COCO + references/detection/coco_utils.py's ConvertCocoPolysToMask box
    code (non-crowd, float32 xywh -> xyxy, clamp, drop degenerate), and the image order of
    torchvision's CocoDetection (ascending id) with _coco_remove_images_without_annotations;
  * train "multiscale": transforms.v2 RandomShortestSize(min_size, max_size) with torch.randint
    returning the driver's min_size index, then RandomHorizontalFlip(p = 1 or 0 as drawn); the
    size and boxes also against GeneralizedRCNNTransform.resize (training, its torch_choice
    returning that min_size);
  * train "lsj": v2 ScaleJitter(target_size=(max_size, max_size), scale_range) with torch.rand
    returning the driver's float32 draw, then the flip;
  * val: GeneralizedRCNNTransform.resize in eval mode (min_size[-1]) and
    RandomShortestSize([min_size[-1]], max_size); the ground truth against pycocotools' anns.

All on tv_tensors.Image (uint8, from PIL as CocoDetection loads it) and tv_tensors.BoundingBoxes.
Needs .venv-bench (scripts/bench_setup); without it the test exits 77, which ctest reports as
SKIP.

Tolerances (measured maxima are printed):
  * output sizes, labels, image ids, ground truth: exactly equal;
  * boxes: within 1e-4 px (they are equal bit for bit here: same float32 operations);
  * normalisation: the driver's floats times std plus mean, times 255, are integers within 1e-3;
  * images (8-bit, after resize and flip): OpenCV resizes with area averaging when shrinking
    and bilinear otherwise, torchvision with its antialiased bilinear (a triangle filter whose
    support grows with the shrink factor); they are different filters. Mean absolute difference
    <= MEAN_TOLERANCE grey levels and max <= MAX_TOLERANCE. JPEG files also go through two
    decoders (PIL's and OpenCV's libjpeg-turbo builds), which agree bit for bit here. Measured
    with torchvision 0.29.1 on 90 samples: shrinking mean <= 0.70, max 5; enlarging mean <= 0.31,
    max 1; boxes equal bit for bit; normalisation off integers by at most 8.4e-6.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from unittest import mock

try:
    import numpy as np
    import torch
    import torchvision
    from PIL import Image
    from pycocotools.coco import COCO
    from torchvision import tv_tensors
    from torchvision.models.detection.transform import GeneralizedRCNNTransform
    from torchvision.transforms import v2 as T
    from torchvision.transforms.v2 import functional as F
except ImportError as e:  # pragma: no cover - the SKIP path
    print(f"SKIP: torchvision or pycocotools is not importable ({e}); run scripts/bench_setup to create .venv-bench")
    sys.exit(77)

MEAN_TOLERANCE = 1.5
MAX_TOLERANCE = 8
BOX_TOLERANCE = 1e-4
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
CATEGORIES = [90, 7, 3, 1]  # listed out of order, ids not contiguous
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


# (file, height, width): PNG and JPEG, landscape, portrait, long and thin (max_size caps them).
IMAGES = [("a.png", 61, 83), ("b.jpg", 90, 64), ("c.png", 120, 47), ("d.png", 37, 150), ("e.jpg", 200, 160),
          ("f.png", 48, 48), ("g.png", 30, 40), ("h.png", 52, 70), ("sub/i.png", 66, 58)]
IDS = [42, 7, 100, 3, 15, 8, 61, 9, 77]
# f.png (id 8): no annotation; g.png (id 61): only a crowd; h.png (id 9): only tiny boxes.


def make_set(d):
    rs = np.random.RandomState(5)
    os.makedirs(os.path.join(d, "images", "sub"))
    images, annotations = [], []
    for (name, h, w), image_id in zip(IMAGES, IDS):
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([xx * 200.0 / w + 20, yy * 180.0 / h + 30, (xx + yy) * 90.0 / (h + w) + 80], -1)
        img += rs.randint(-12, 12, (h, w, 3))
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(d, "images", name), quality=95)
        images.append({"id": image_id, "file_name": name, "width": w, "height": h})
        if name == "f.png":
            continue
        boxes = []
        if name == "g.png":
            boxes.append(([2.0, 3.0, 20.0, 15.0], 1))
        elif name == "h.png":
            boxes += [([4.0, 4.0, 1.0, 9.0], 0), ([10.0, 10.0, 6.0, 0.5], 0)]
        else:
            for _ in range(rs.randint(3, 8)):
                bw, bh = rs.uniform(2, w * 0.6), rs.uniform(2, h * 0.6)
                x, y = rs.uniform(-5, w - bw / 2), rs.uniform(-5, h - bh / 2)  # some reach past an edge
                boxes.append(([round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)], int(rs.rand() < 0.15)))
            boxes.append(([1.5, 2.0, 0.0, 7.0], 0))            # degenerate: gt only
            boxes.append(([w - 0.25, 3.0, 5.0, 5.0], 0))       # clamped to a 0.25 px sliver
            boxes.append(([float(w + 3), 1.0, 4.0, 4.0], 0))   # wholly outside: clamped away
        for bbox, crowd in boxes:
            annotations.append({"id": 1000 + len(annotations), "image_id": image_id,
                                "category_id": CATEGORIES[rs.randint(len(CATEGORIES))], "bbox": bbox,
                                "area": round(bbox[2] * bbox[3] * rs.uniform(0.5, 1.0), 3), "iscrowd": crowd,
                                "segmentation": [[bbox[0], bbox[1], bbox[0] + bbox[2], bbox[1], bbox[0], bbox[1] + bbox[3]]]})
    path = os.path.join(d, "instances.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": c, "name": f"c{c}"} for c in CATEGORIES]}, f)
    return path


def convert_coco_boxes(anno, h, w):
    """references/detection/coco_utils.py ConvertCocoPolysToMask, the box part."""
    anno = [obj for obj in anno if obj["iscrowd"] == 0]
    boxes = torch.as_tensor([obj["bbox"] for obj in anno], dtype=torch.float32).reshape(-1, 4)
    boxes[:, 2:] += boxes[:, :2]
    boxes[:, 0::2].clamp_(min=0, max=w)
    boxes[:, 1::2].clamp_(min=0, max=h)
    classes = torch.tensor([obj["category_id"] for obj in anno], dtype=torch.int64)
    keep = (boxes[:, 3] > boxes[:, 1]) & (boxes[:, 2] > boxes[:, 0])
    return boxes[keep], classes[keep]


def torchvision_kept_ids(coco):
    """references/detection/coco_utils.py _coco_remove_images_without_annotations (no keypoints)."""
    def has_valid(anno):
        return len(anno) > 0 and not all(any(o <= 1 for o in obj["bbox"][2:]) for obj in anno)
    return [i for i in sorted(coco.imgs) if has_valid(coco.loadAnns(coco.getAnnIds(imgIds=i, iscrowd=None)))]


CASES = [
    # (name, split, seeds, keys)
    ("multiscale", "train", 6, {"min_size": [48, 64, 80, 96, 112], "max_size": 160, "hflip": 0.5}),
    ("lsj", "train", 6, {"min_size": [800], "max_size": 128, "scale_jitter": [0.3, 2.0], "hflip": 0.5}),
    ("val", "val", 1, {"min_size": [64, 72], "max_size": 120, "contiguous_labels": True}),
    ("val_default", "val", 1, {}),
]


def driver_args(images, path, split, keys):
    values = {"images": images, "annotations": path, "val_images": images, "val_annotations": path,
              "test_images": "", "test_annotations": "", "min_size": [800], "max_size": 1333,
              "scale_jitter": [0.0, 0.0], "hflip": 0.5, "mean": MEAN, "std": STD, "contiguous_labels": False,
              "skip_empty": True, "num_classes": 91, "allow_outside_root": False, "drop_negative_boxes": False,
              "max_image_pixels": 178956970}
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
        elif all(isinstance(x, int) for x in v):
            out.append(f"{k}=ia:{','.join(str(x) for x in v)}")
        else:
            out.append(f"{k}=fa:{','.join(repr(float(x)) for x in v)}")
    out.append("files=sa:")  # a string array; none: the split's directory and JSON
    return out


def replay(case, keys, sample, img, boxes, labels):
    """torchvision's image and target for the driver's drawn parameters."""
    plan = sample["plan"]
    h, w = img.shape[-2:]
    target = {"boxes": tv_tensors.BoundingBoxes(boxes, format="XYXY", canvas_size=(h, w)), "labels": labels}
    min_sizes, max_size = keys.get("min_size", [800]), keys.get("max_size", 1333)
    if case == "lsj":
        sr = keys["scale_jitter"]
        with mock.patch("torch.rand", return_value=torch.tensor([plan["u"]], dtype=torch.float32)):
            img, target = T.ScaleJitter(target_size=(max_size, max_size), scale_range=tuple(sr))(img, target)
    elif case == "multiscale":
        index = min_sizes.index(plan["min_size"])
        with mock.patch("torch.randint", return_value=torch.tensor(index)):
            img, target = T.RandomShortestSize(min_size=min_sizes, max_size=max_size)(img, target)
    else:
        img, target = T.RandomShortestSize(min_size=[min_sizes[-1]], max_size=max_size)(img, target)
    img, target = T.RandomHorizontalFlip(p=1.0 if plan["flip"] else 0.0)(img, target)
    return img, target


def rcnn_resize(case, keys, sample, img, boxes):
    """GeneralizedRCNNTransform.resize's size and boxes (train: its choice forced to the plan's)."""
    min_sizes, max_size = keys.get("min_size", [800]), keys.get("max_size", 1333)
    t = GeneralizedRCNNTransform(min_size=tuple(min_sizes), max_size=max_size, image_mean=MEAN, image_std=STD)
    t.train(case != "val" and case != "val_default")
    t.torch_choice = lambda k: sample["plan"]["min_size"]
    out, target = t.resize(img.as_subclass(torch.Tensor).float(), {"boxes": boxes.clone()})
    return list(out.shape[-2:]), target["boxes"]


def main():
    driver, plugin = sys.argv[1], sys.argv[2]
    started = time.time()
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    worst = {}
    n = 0
    seen_sizes, seen_flips = set(), set()
    with tempfile.TemporaryDirectory() as d:
        path = make_set(d)
        images_dir = os.path.join(d, "images")
        with mock.patch("builtins.print"):  # pycocotools' index messages
            coco = COCO(path)
        cat_rank = {c: k for k, c in enumerate(sorted(CATEGORIES))}
        kept_tv = torchvision_kept_ids(coco)
        kept_ours = [i for i in kept_tv
                     if any(a["iscrowd"] == 0 and a["bbox"][2] > 1 and a["bbox"][3] > 1
                            for a in coco.loadAnns(coco.getAnnIds(imgIds=i)))]
        originals = {}
        for i, info in coco.imgs.items():
            pil = Image.open(os.path.join(images_dir, info["file_name"])).convert("RGB")
            originals[i] = tv_tensors.Image(F.pil_to_tensor(pil))
        for case, split, seeds, keys in CASES:
            res = subprocess.run([driver, plugin, split, d, str(seeds), *driver_args(images_dir, path, split, keys)],
                                 capture_output=True, text=True)
            check(res.returncode == 0, f"{case}: driver failed: {res.stderr.strip()}")
            if res.returncode:
                continue
            samples = [json.loads(line) for line in res.stdout.splitlines()]
            order = [s["image_id"] for s in samples[::seeds]]
            want_order = kept_ours if split == "train" else sorted(coco.imgs)
            check(order == want_order, f"{case}: image ids {order} != {want_order}")
            contiguous = keys.get("contiguous_labels", False)
            for s in samples:
                where = f"{case} image {s['image_id']} seed {s['seed']}"
                image_id = s["image_id"]
                img = originals[image_id]
                h, w = img.shape[-2:]
                check(s["orig_size"] == [h, w], f"{where}: orig_size {s['orig_size']} != {[h, w]}")
                anno = coco.loadAnns(coco.getAnnIds(imgIds=image_id))
                boxes, labels = convert_coco_boxes(anno, h, w)
                if contiguous:
                    labels = torch.tensor([cat_rank[int(c)] for c in labels], dtype=torch.int64)
                want_img, want_t = replay(case, keys, s, img, boxes, labels)
                size = list(want_img.shape[-2:])
                check(s["shape"] == [3, *size] and s["plan"]["sized"] == size,
                      f"{where}: size {s['shape']} (plan {s['plan']['sized']}) != torchvision's {size}")
                if s["shape"] != [3, *size]:
                    continue
                if case != "lsj":
                    rcnn_size, rcnn_boxes = rcnn_resize(case, keys, s, img, boxes)
                    check(rcnn_size == size, f"{where}: GeneralizedRCNNTransform size {rcnn_size} != {size}")
                    if not s["plan"]["flip"]:
                        err = float((torch.tensor(s["boxes"]).view(-1, 4) - rcnn_boxes).abs().max()) if len(boxes) else 0.0
                        check(err <= BOX_TOLERANCE, f"{where}: boxes differ from GeneralizedRCNNTransform's by {err:.3g}")
                seen_sizes.add((case, s["plan"]["min_size"]))
                seen_flips.add((case, s["plan"]["flip"]))
                got_boxes = torch.tensor(s["boxes"], dtype=torch.float32).view(-1, 4)
                want_boxes = want_t["boxes"].as_subclass(torch.Tensor)
                check(got_boxes.shape == want_boxes.shape, f"{where}: {len(got_boxes)} boxes != {len(want_boxes)}")
                if got_boxes.shape == want_boxes.shape and len(got_boxes):
                    err = float((got_boxes - want_boxes).abs().max())
                    worst["boxes"] = max(worst.get("boxes", 0.0), err)
                    check(err <= BOX_TOLERANCE, f"{where}: boxes differ by {err:.3g} px")
                check(s["labels"] == want_t["labels"].tolist(), f"{where}: labels {s['labels']} != {want_t['labels'].tolist()}")
                # Pixels: undo the normalisation, then compare grey levels.
                got = torch.from_numpy(np.fromfile(os.path.join(d, s["file"]), dtype=np.float32)).view(3, *size).double()
                grey = (got * torch.tensor(STD).view(3, 1, 1) + torch.tensor(MEAN).view(3, 1, 1)) * 255
                off = float((grey - grey.round()).abs().max())
                worst["normalise"] = max(worst.get("normalise", 0.0), off)
                check(off <= 1e-3, f"{where}: normalised pixels are not (v / 255 - mean) / std (off by {off:.3g})")
                diff = (grey.round().int() - want_img.as_subclass(torch.Tensor).int()).abs()
                mean, mx = float(diff.float().mean()), int(diff.max())
                kind = "same" if size == [h, w] else "shrink" if size[0] <= h and size[1] <= w else "enlarge"
                key = f"{kind} {'jpeg' if img_name(coco, image_id).endswith('.jpg') else 'png'}"
                wm = worst.setdefault(key, [0.0, 0, 0])
                wm[0], wm[1], wm[2] = max(wm[0], mean), max(wm[1], mx), wm[2] + 1
                check(mean <= MEAN_TOLERANCE and mx <= MAX_TOLERANCE,
                      f"{where}: image differs by mean {mean:.3f}, max {mx} grey levels ({key})")
                if split != "train":
                    gt = torch.as_tensor([a["bbox"] for a in anno], dtype=torch.float32).reshape(-1, 4)
                    gt[:, 2:] += gt[:, :2]
                    check(torch.equal(torch.tensor(s["gt_boxes"], dtype=torch.float32).view(-1, 4), gt),
                          f"{where}: gt_boxes differ from pycocotools' bboxes")
                    want_labels = [cat_rank[a["category_id"]] if contiguous else a["category_id"] for a in anno]
                    check(s["gt_labels"] == want_labels, f"{where}: gt_labels {s['gt_labels']} != {want_labels}")
                    check(s["gt_iscrowd"] == [a["iscrowd"] for a in anno], f"{where}: gt_iscrowd differs")
                    check(torch.equal(torch.tensor(s["gt_areas"], dtype=torch.float32),
                                      torch.tensor([a["area"] for a in anno], dtype=torch.float32)),
                          f"{where}: gt_areas differ")
                n += 1
    dropped = sorted(set(kept_tv) - set(kept_ours))
    check(dropped == [61], f"skip_empty: torchvision keeps {kept_tv}, we keep {kept_ours}")
    for case, count in (("multiscale", 5), ("lsj", 1)):
        check(len([1 for c, _ in seen_sizes if c == case]) == count, f"{case}: min_size draws {sorted(seen_sizes)}")
        check({(case, 0), (case, 1)} <= seen_flips, f"{case}: the flip never / always happened")
    print(f"{n} samples compared in {time.time() - started:.1f} s; sizes, labels, image order and ground truth equal")
    print(f"  boxes: max difference {worst.get('boxes', 0.0):.3g} px; normalisation: max {worst.get('normalise', 0.0):.3g}")
    print(f"  skip_empty: torchvision's rule also keeps image(s) {dropped} (crowd boxes only); coco_detection drops them")
    for key in sorted(k for k in worst if k not in ("boxes", "normalise")):
        mean, mx, count = worst[key]
        print(f"  {key:14s} image ({count:3d} samples): worst mean difference {mean:.3f}, max {mx} grey levels")
    if failures:
        print(f"{len(failures)} comparison(s) failed")
        return 1
    print("all comparisons within tolerance")
    return 0


def img_name(coco, image_id):
    return coco.imgs[image_id]["file_name"]


if __name__ == "__main__":
    sys.exit(main())
