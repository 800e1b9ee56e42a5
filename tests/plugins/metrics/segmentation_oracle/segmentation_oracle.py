"""PyTorch and torchmetrics oracle for semantic segmentation in basic_losses and basic_metrics.

segmentation_oracle_driver (C++) runs the plugins through their C ABI on fixed random logits
[B, C, H, W] and int64 masks with ignored pixels, and writes inputs and results. Here:

- Loss: org.torchhost.cross_entropy (ignore_index 255, label smoothing 0 and 0.1) and
  org.torchhost.weighted_sum (items = "labelled", out + 0.5 aux) against
  torch.nn.functional.cross_entropy(ignore_index=255): the count equals the labelled pixels, the
  sum equals reduction="sum", sum / count equals torchvision's reference criterion
  `ce(out) + 0.5 * ce(aux)` (each a mean), and the gradients equal autograd's. On an all-ignored
  batch PyTorch's mean is NaN; the plugin returns sum 0, count 0 and zero gradients.
- Metric: org.torchhost.mean_iou over four batches (one all-ignored) against torchmetrics
  1.9's MulticlassConfusionMatrix (bitwise), MulticlassJaccardIndex (average none and macro),
  MulticlassAccuracy (micro = pixel accuracy, macro = mean accuracy), all with ignore_index 255,
  and 0 (inside [0, K)). torchmetrics divides in float32 (`confmat.float()`), so its values are
  compared to 1e-6 and, to 1e-12, torchmetrics' formulas evaluated in float64 on its own
  confusion matrix. The state of two "ranks" taking alternate batches, summed, must give the
  one-pass confusion matrix and bitwise the same values.

Needs .venv-bench (torch 2.14.1, torchmetrics 1.9.0); run_bench_oracle.sh exits 77 (SKIP) without
it. Usage: segmentation_oracle.py <driver> <basic_losses.so> <basic_metrics.so>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix, MulticlassJaccardIndex

IGNORE = 255
TOLERANCE = {"float32": 2e-6, "float64": 1e-12}  # relative, sums and gradients
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
        print("FAIL " + message)


def load(directory, name, dtype, shape):
    return torch.from_numpy(np.fromfile(os.path.join(directory, name), dtype=dtype).reshape(shape))


def relative(a, b):
    scale = max(float(b.abs().max()) if b.numel() else 0.0, 1e-30)
    return float((a - b).abs().max()) / scale if a.numel() else 0.0


def loss_case(directory, fields):
    stem, component, dtype = fields["loss"], fields["component"], fields["dtype"]
    shape = tuple(int(x) for x in fields["shape"].split("x"))
    npdtype = np.float64 if dtype == "float64" else np.float32
    b, c, h, w = shape
    mask = load(directory, fields["mask"], np.int64, (b, h, w))
    smoothing = float(fields["label_smoothing"])
    outputs = [name for name in ("out", "aux") if name in fields]
    logits = {n: load(directory, fields[n], npdtype, shape).requires_grad_() for n in outputs}
    weights = {"out": 1.0, "aux": 0.5}
    torch_sum = sum(weights[n] * F.cross_entropy(logits[n], mask, ignore_index=IGNORE, reduction="sum",
                                                 label_smoothing=smoothing) for n in outputs)
    grads = torch.autograd.grad(torch_sum, [logits[n] for n in outputs])
    torch_sum = torch_sum.detach()
    # torchvision's references/segmentation/train.py criterion, with its means.
    torchvision_mean = sum(weights[n] * F.cross_entropy(logits[n], mask, ignore_index=IGNORE,
                                                        label_smoothing=smoothing) for n in outputs).detach()
    labelled = int((mask != IGNORE).sum())
    ours_sum, ours_count = float(fields["sum"]), int(fields["count"])
    where = f"{stem} ({component}, {dtype}, label_smoothing {smoothing})"
    check(ours_count == labelled, f"{where}: count {ours_count}, labelled pixels {labelled}")
    sum_difference = abs(ours_sum - float(torch_sum)) / max(abs(float(torch_sum)), 1e-30)
    grad_difference = max(relative(load(directory, fields["grad_" + n], npdtype, shape), g)
                          for n, g in zip(outputs, grads))
    if labelled == 0:
        check(torch.isnan(torchvision_mean).item(), f"{where}: PyTorch's mean over no pixel should be NaN")
        check(ours_sum == 0.0 and float(torch_sum) == 0.0, f"{where}: all ignored: sum {ours_sum}, PyTorch {float(torch_sum)}")
        check(grad_difference == 0.0 and all(float(g.abs().max()) == 0.0 for g in grads),
              f"{where}: all ignored: gradients not zero")
        return {"all_ignored": 1}
    mean_difference = abs(ours_sum / ours_count - float(torchvision_mean)) / abs(float(torchvision_mean))
    tolerance = TOLERANCE[dtype]
    check(sum_difference <= tolerance, f"{where}: sum {ours_sum!r} vs PyTorch {float(torch_sum)!r} ({sum_difference:.3g})")
    check(mean_difference <= tolerance, f"{where}: sum/count vs torchvision's criterion: {mean_difference:.3g}")
    check(grad_difference <= tolerance, f"{where}: gradients differ by {grad_difference:.3g} (relative)")
    return {dtype: max(sum_difference, mean_difference, grad_difference)}


def float64_reference(confmat, classes, ignore_index):
    """torchmetrics 1.9's _jaccard_index_reduce and _accuracy_reduce (+ _adjust_weights_safe_divide),
    written out in float64 instead of its confmat.float() (float32)."""
    m = confmat.double()
    diag, rows, cols = torch.diag(m), m.sum(1), m.sum(0)
    union = rows + cols - diag
    iou = torch.where(union > 0, diag / union.clamp_min(1), torch.zeros_like(diag))
    weights = torch.ones(classes, dtype=torch.float64)
    if 0 <= ignore_index < classes:
        weights[ignore_index] = 0.0
    weights[rows + cols == 0] = 0.0
    miou = float(((weights * iou) / weights.sum()).sum())
    recall = torch.where(rows > 0, diag / rows.clamp_min(1), torch.zeros_like(diag))
    recall_weights = torch.ones(classes, dtype=torch.float64)
    recall_weights[union == 0] = 0.0
    values = {"miou": miou, "pixel_accuracy": float(diag.sum() / m.sum()),
              "mean_accuracy": float((recall_weights * recall / recall_weights.sum()).sum())}
    values.update({f"iou_{k}": float(iou[k]) for k in range(classes)})
    return values


def metric_case(directory, tokens, values):
    name, classes, ignore_index = tokens[1], int(tokens[3]), int(tokens[5])
    batches = []
    i = tokens.index("batches") + 1
    while tokens[i] != "confusion":
        logits_file, mask_file, dims = tokens[i:i + 3]
        b, h, w = (int(x) for x in dims.split("x"))
        batches.append((load(directory, logits_file, np.float32, (b, classes, h, w)),
                        load(directory, mask_file, np.int64, (b, h, w))))
        i += 3
    ours = load(directory, tokens[i + 1], np.int64, (classes, classes))
    two = load(directory, tokens[i + 3], np.int64, (classes, classes))
    kwargs = {"num_classes": classes, "ignore_index": ignore_index}
    confusion = MulticlassConfusionMatrix(**kwargs)
    metrics = {"iou": MulticlassJaccardIndex(average="none", **kwargs),
               "miou": MulticlassJaccardIndex(average="macro", **kwargs),
               "pixel_accuracy": MulticlassAccuracy(average="micro", **kwargs),
               "mean_accuracy": MulticlassAccuracy(average="macro", **kwargs)}
    for logits, mask in batches:  # accumulated across updates, as the evaluation does
        confusion.update(logits, mask)
        for m in metrics.values():
            m.update(logits, mask)
    expected_confusion = confusion.compute()
    # torchvision's references/segmentation/utils.py ConfusionMatrix.update, the same counts.
    reference = torch.zeros(classes, classes, dtype=torch.int64)
    for logits, mask in batches:
        a, p = mask.flatten(), logits.argmax(1).flatten()
        k = (a >= 0) & (a < classes) & (a != ignore_index)
        reference += torch.bincount(classes * a[k] + p[k], minlength=classes ** 2).reshape(classes, classes)
    check(torch.equal(ours, expected_confusion), f"{name}: confusion matrix differs from torchmetrics'")
    check(torch.equal(ours, reference), f"{name}: confusion matrix differs from torchvision's reference")
    check(torch.equal(two, ours), f"{name}: two ranks' summed confusion differs from one pass")
    tm = {"miou": float(metrics["miou"].compute()), "pixel_accuracy": float(metrics["pixel_accuracy"].compute()),
          "mean_accuracy": float(metrics["mean_accuracy"].compute())}
    tm.update({f"iou_{k}": float(v) for k, v in enumerate(metrics["iou"].compute())})
    f64 = float64_reference(expected_confusion, classes, ignore_index)
    one, summed = values[(name, "one")], values[(name, "two")]
    check(one == summed, f"{name}: two ranks' values differ from one pass: {one} vs {summed}")
    check(set(one) == set(tm), f"{name}: value names {sorted(one)} vs torchmetrics' {sorted(tm)}")
    worst_tm = max(abs(one[k] - tm[k]) for k in tm)
    worst_f64 = max(abs(one[k] - f64[k]) for k in f64)
    check(worst_tm <= 1e-6, f"{name}: torchmetrics (float32) differs by {worst_tm:.3g}")
    check(worst_f64 <= 1e-12, f"{name}: torchmetrics' formulas in float64 differ by {worst_f64:.3g}")
    absent = [k for k in range(classes) if int(expected_confusion[k].sum() + expected_confusion[:, k].sum()) == 0]
    predicted_only = [k for k in range(classes)
                      if int(expected_confusion[k].sum()) == 0 and int(expected_confusion[:, k].sum()) > 0]
    check(bool(absent) and bool(predicted_only), f"{name}: the edge classes did not occur ({absent}, {predicted_only})")
    print(f"{name}: confusion matrix equal to torchmetrics' and torchvision's; miou {one['miou']:.6f}, pixel accuracy "
          f"{one['pixel_accuracy']:.6f}, mean accuracy {one['mean_accuracy']:.6f}; max |diff| vs torchmetrics "
          f"{worst_tm:.3g} (float32), vs its formulas in float64 {worst_f64:.3g}; classes absent {absent}, "
          f"predicted only {predicted_only}; two ranks equal one pass")


def main():
    driver, losses, metrics = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([driver, losses, metrics, directory], check=True)
        with open(os.path.join(directory, "cases.txt")) as f:
            lines = [line.split() for line in f if line.strip()]
        worst = {}
        for tokens in lines:
            if tokens[0] == "loss":
                fields = dict(zip(tokens[0::2], tokens[1::2]))
                for key, difference in loss_case(directory, fields).items():
                    worst[key] = worst.get(key, 0) + difference if key == "all_ignored" else max(worst.get(key, 0.0), difference)
        print(f"loss: {sum(t[0] == 'loss' for t in lines)} cases; max relative difference to PyTorch "
              f"{torch.__version__} (sum, sum/count vs torchvision's criterion, gradients): float32 "
              f"{worst.get('float32', float('nan')):.3g}, float64 {worst.get('float64', float('nan')):.3g}; "
              f"{worst.get('all_ignored', 0)} all-ignored cases: sum 0, count 0, zero gradients (PyTorch's mean: NaN)")
        if worst.get("all_ignored", 0) == 0:
            check(False, "no all-ignored loss case ran")
        values = {}
        for tokens in lines:
            if tokens[0] == "values":
                values[(tokens[1], tokens[2])] = {tokens[i]: float(tokens[i + 1]) for i in range(3, len(tokens), 2)}
        cases = [tokens for tokens in lines if tokens[0] == "metric"]
        for tokens in cases:
            metric_case(directory, tokens, values)
        if len(cases) != 2 or not any(t[0] == "loss" for t in lines):
            check(False, "the driver wrote too few cases")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
