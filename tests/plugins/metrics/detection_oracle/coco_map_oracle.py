"""pycocotools and torchmetrics oracle for detection_metrics' org.torchhost.coco_map.

coco_map_driver (C++) runs the metric through its C ABI on six random batches of ragged
detections and ground truth (every size class, crowd regions, given areas (a fifth of them 0,
kept as pycocotools keeps a JSON's 0), a batch without areas (the boxes'), images without objects
or detections, 130 detections in one image, a class never detected and one never present, scores
on a 0.05 grid so that ties abound) and writes the inputs and the values it computed: as one
process, as two ranks taking alternate batches and gathering their rows (rank 0's first), and the
same ranks gathered the other way round. Here:

- pycocotools 2.0 COCOeval (iouType "bbox") on the same boxes (x, y, w, h as torchmetrics converts
  them) gives the 12 stats; the metric's must equal them within 1e-12 (numpy sums its means
  pairwise, the metric in order: ~1e-16 apart).
- torchmetrics 1.9 MeanAveragePrecision (backend pycocotools, class_metrics) on the same
  per-image dicts gives map ... mar_large and map_per_class: equal within 1e-6 (torchmetrics
  hands back float32). It is given pycocotools' thresholds (np.linspace, float64): its defaults
  come from torch.linspace in float32 (0.550000011920929 ...), which moves a recall exactly on a
  threshold to the next point; that default's largest difference is printed, not asserted.
- The two-rank values, in both gather orders, equal the one-process values exactly (the metric
  breaks score ties by image id, not by the order rows arrive in); reset() leaves no row (every
  value -1).

Needs .venv-bench (torch, torchmetrics 1.9, pycocotools); run_bench_oracle.sh exits 77 (SKIP)
without it. Usage: coco_map_oracle.py <driver> <detection_metrics.so>
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from torchmetrics.detection import MeanAveragePrecision

STATS = ["map", "map_50", "map_75", "map_small", "map_medium", "map_large",
         "mar_1", "mar_10", "mar_100", "mar_small", "mar_medium", "mar_large"]
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
        print("FAIL " + message)


def read_manifest(directory):
    batches, values = [], {}
    with open(os.path.join(directory, "manifest.txt")) as f:
        for line in f:
            words = line.split()
            if words[0] == "batch":
                fields = {}
                for i in range(4, len(words), 4):
                    name, file, dtype = words[i], words[i + 1], words[i + 2]
                    array = np.fromfile(os.path.join(directory, file), dtype=np.int64 if dtype == "int64" else np.float32)
                    fields[name] = torch.from_numpy(array)
                batches.append(fields)
            else:
                values[words[1]] = {words[i]: float(words[i + 1]) for i in range(2, len(words), 2)}
    return batches, values


def per_image(batches):
    """(preds, targets) lists of per-image dicts, in image-id order."""
    preds, targets = [], []
    for b in batches:
        images = b["image_id"].numel()
        d_off, g_off = b["detection_boxes_offsets"], b["boxes_offsets"]
        boxes, gt = b["detection_boxes"].view(-1, 4), b["boxes"].view(-1, 4)
        for i in range(images):
            d = slice(int(d_off[i]), int(d_off[i + 1]))
            g = slice(int(g_off[i]), int(g_off[i + 1]))
            preds.append({"boxes": boxes[d], "scores": b["detection_scores"][d], "labels": b["detection_labels"][d]})
            target = {"boxes": gt[g], "labels": b["labels"][g], "iscrowd": b["iscrowd"][g]}
            if "areas" in b:  # one batch has none: the boxes' areas
                target["area"] = b["areas"][g]
            targets.append(target)
    return preds, targets


def xywh(boxes):
    """torchvision's box_convert xyxy -> xywh in float32, as torchmetrics feeds pycocotools."""
    return torch.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]], 1).tolist()


def pycocotools_stats(preds, targets, classes):
    images, annotations, results = [], [], []
    for image, (p, t) in enumerate(zip(preds, targets)):
        images.append({"id": image})
        boxes = xywh(t["boxes"])
        # A given area as the JSON would hold it, 0 included (pycocotools keeps it: a small object);
        # none given: the box's, as torchmetrics and coco_detection fill it.
        areas = t["area"].tolist() if "area" in t else [box[2] * box[3] for box in boxes]
        for box, label, crowd, area in zip(boxes, t["labels"].tolist(), t["iscrowd"].tolist(), areas):
            annotations.append({"id": len(annotations) + 1, "image_id": image, "bbox": box, "category_id": label,
                                "iscrowd": crowd, "area": area})
        for box, label, score in zip(xywh(p["boxes"]), p["labels"].tolist(), p["scores"].tolist()):
            results.append({"image_id": image, "bbox": box, "category_id": label, "score": score})
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO()
        truth.dataset = {"images": images, "annotations": annotations,
                         "categories": [{"id": c, "name": str(c)} for c in range(classes)]}
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return dict(zip(STATS, evaluation.stats.tolist()))


def main():
    driver, library = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([driver, library, directory], check=True)
        batches, values = read_manifest(directory)
    preds, targets = per_image(batches)
    classes = 5
    print(f"{len(preds)} images, {sum(len(p['scores']) for p in preds)} detections, "
          f"{sum(len(t['labels']) for t in targets)} objects ({sum(int(t['iscrowd'].sum()) for t in targets)} crowd, "
          f"{sum(int((t['area'] == 0).sum()) for t in targets if 'area' in t)} with area 0, "
          f"{sum(len(t['labels']) for t in targets if 'area' not in t)} without an area)")

    coco = pycocotools_stats(preds, targets, classes)
    one = values["one"]
    for name in STATS:
        check(abs(one[name] - coco[name]) <= 1e-12, f"{name}: metric {one[name]!r}, pycocotools {coco[name]!r}")
    print("pycocotools: " + " ".join(f"{n} {coco[n]:.6f}" for n in STATS))

    iou_thresholds = np.linspace(0.5, 0.95, 10).tolist()  # pycocotools' Params, float64
    recall_thresholds = np.linspace(0.0, 1.0, 101).tolist()
    reference = MeanAveragePrecision(box_format="xyxy", iou_type="bbox", backend="pycocotools", class_metrics=True,
                                     iou_thresholds=iou_thresholds, rec_thresholds=recall_thresholds)
    reference.warn_on_many_detections = False  # image 5's 130 detections are on purpose
    # torchmetrics reads an area of 0 as "none given" and uses the box's; 1e-30 is in the same size
    # class as 0 (small) for any box, so it stands in for the JSON's 0 that pycocotools keeps.
    targets_tm = [dict(t, area=torch.where(t["area"] > 0, t["area"], 1e-30)) if "area" in t else t for t in targets]
    reference.update(preds, targets_tm)
    default = MeanAveragePrecision(box_format="xyxy", iou_type="bbox", backend="pycocotools")
    default.warn_on_many_detections = False
    default.update(preds, targets_tm)
    with contextlib.redirect_stdout(io.StringIO()):
        tm = reference.compute()
        tm_default = default.compute()
    print("torchmetrics with its default float32 thresholds differs by at most "
          f"{max(abs(one[n] - float(tm_default[n])) for n in STATS):.2e}")
    for name in STATS:
        check(abs(one[name] - float(tm[name])) <= 1e-6, f"{name}: metric {one[name]!r}, torchmetrics {float(tm[name])!r}")
    per_class = dict(zip(tm["classes"].tolist(), tm["map_per_class"].tolist()))
    configured_classes = 91  # the driver's num_classes: COCO's ids, more values than the 64 hosts once read
    check(len(one) == 12 + configured_classes, f"{len(one)} values, expected 12 + {configured_classes} per class")
    for c in range(configured_classes):
        expected = per_class.get(c, -1.0)
        check(abs(one[f"map_class_{c}"] - expected) <= 1e-6,
              f"map_class_{c}: metric {one[f'map_class_{c}']!r}, torchmetrics {expected!r}")
    check(one["map_class_3"] == 0.0 and one["map_class_4"] == -1.0,
          f"class 3 (never detected) must have AP 0 and class 4 (no object) -1: {one['map_class_3']}, {one['map_class_4']}")

    for run in ("two", "two_rank1", "two_swapped"):
        check(values[run] == one, f"{run}: gathered rows give other values than one process: {values[run]} vs {one}")
    check(all(v == -1.0 for v in values["after_reset"].values()), f"after reset: {values['after_reset']}")
    print("metric:      " + " ".join(f"{n} {one[n]:.6f}" for n in STATS))
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("coco_map oracle: 12 stats equal pycocotools (1e-12) and torchmetrics (1e-6), per-class AP too (91 classes); "
          "two ranks in both gather orders equal one process bitwise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
