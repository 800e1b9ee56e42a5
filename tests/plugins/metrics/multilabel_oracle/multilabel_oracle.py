"""PyTorch, timm and torchmetrics oracle for multi-label classification in basic_losses and basic_metrics.

multilabel_oracle_driver (C++) runs the plugins through their C ABI on fixed random logits [B, L]
and targets, and writes inputs and results. Here:

- Loss: org.torchhost.bce_with_logits against torch.nn.BCEWithLogitsLoss(reduction="sum",
  pos_weight=...) on multi-hot targets (float and integer): the sum, the count B x L (so the
  host's sum / count is reduction="mean") and the gradient; on class indices with
  label_smoothing 0.1 against timm's BinaryCrossEntropy(smoothing=0.1), the mean; target_threshold
  0.2 (timm's --bce-target-thresh) on smoothed class indices and on Mixup-like blended targets
  against timm's BinaryCrossEntropy(target_threshold=0.2).
- Metric: org.torchhost.multilabel over four batches with tied scores, a label never present, one
  always present and one never predicted, against torchmetrics' MultilabelAccuracy,
  MultilabelF1Score and MultilabelAveragePrecision (average="macro", threshold 0.5).

Needs .venv-bench (torch, timm, torchmetrics); run_bench_oracle.sh exits 77 (SKIP) without it.
Usage: multilabel_oracle.py <driver> <basic_losses.so> <basic_metrics.so>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from timm.loss import BinaryCrossEntropy
from torchmetrics.classification import MultilabelAccuracy, MultilabelAveragePrecision, MultilabelF1Score

failures = []


def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message)
    if not ok:
        failures.append(message)


def load(directory, name, dtype, shape):
    return torch.from_numpy(np.fromfile(os.path.join(directory, name), dtype=dtype).reshape(shape))


def loss_case(directory, words):
    f = dict(zip(words[0::2], words[1::2]))
    b, l = (int(x) for x in f["shape"].split("x"))
    logits = load(directory, f["logits"], np.float32, (b, l)).double().requires_grad_()
    grad = load(directory, f["grad"], np.float32, (b, l)).double()
    weights = [float(w) for w in words[len(words) - 1 - words[::-1].index("pos_weight") + 1:]]
    if f["target_kind"] == "index":
        target = load(directory, f["target"], np.int64, (b,))
        smoothing = float(f["smoothing"])
        threshold = float(f["threshold"]) if float(f["threshold"]) >= 0 else None
        expected = BinaryCrossEntropy(smoothing=smoothing, target_threshold=threshold)(logits, target)
        got = float(f["sum"]) / int(f["count"])
        check(abs(got - float(expected)) <= 1e-6 * abs(float(expected)),
              f"{f['loss']}: mean {got:.9g} = timm BinaryCrossEntropy(smoothing={smoothing}, "
              f"target_threshold={threshold}) {float(expected):.9g}")
        return
    target = load(directory, f["target"], np.float32, (b, l)).double()
    if float(f["threshold"]) >= 0:
        # timm's BinaryCrossEntropy(target_threshold=t) on dense targets (Mixup's): binarised, then BCE.
        dense = BinaryCrossEntropy(target_threshold=float(f["threshold"]))(logits.detach(), target)
        got = float(f["sum"]) / int(f["count"])
        check(abs(got - float(dense)) <= 1e-6 * abs(float(dense)),
              f"{f['loss']}: mean {got:.9g} = timm BinaryCrossEntropy(target_threshold={f['threshold']}) {float(dense):.9g}")
        target = target.gt(float(f["threshold"])).double()
    pos_weight = torch.tensor(weights, dtype=torch.float64) if weights else None
    expected = torch.nn.BCEWithLogitsLoss(reduction="sum", pos_weight=pos_weight)(logits, target)
    expected.backward()
    check(abs(float(f["sum"]) - float(expected)) <= 1e-6 * abs(float(expected)),
          f"{f['loss']}: sum {float(f['sum']):.9g} = BCEWithLogitsLoss(reduction='sum') {float(expected):.9g}")
    check(int(f["count"]) == b * l, f"{f['loss']}: count {f['count']} = B x L = {b * l}")
    check(float((grad - logits.grad).abs().max()) <= 1e-6, f"{f['loss']}: gradient equal to autograd's within 1e-6")


def metric_case(directory, words, values):
    labels = int(words[words.index("labels") + 1])
    rest = words[words.index("batches") + 1:]
    logits, targets = [], []
    for i in range(0, len(rest), 3):
        size = int(rest[i + 2])
        logits.append(load(directory, rest[i], np.float32, (size, labels)))
        targets.append(load(directory, rest[i + 1], np.float32, (size, labels)).long())
    metrics = {"label_accuracy": MultilabelAccuracy(num_labels=labels, average="macro"),
               "label_f1": MultilabelF1Score(num_labels=labels, average="macro"),
               "map": MultilabelAveragePrecision(num_labels=labels, average="macro")}
    for x, y in zip(logits, targets):
        for metric in metrics.values():
            metric.update(x, y)
    for name, metric in metrics.items():
        expected = float(metric.compute())
        got = values[name]
        check(abs(got - expected) <= 1e-6, f"metric {name}: {got:.9g} = torchmetrics {expected:.9g}")


def main():
    driver, losses, metrics = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([driver, losses, metrics, directory], check=True)
        lines = open(os.path.join(directory, "cases.txt")).read().splitlines()
        metric_words, values = None, {}
        for line in lines:
            words = line.split()
            if words[0] == "loss":
                loss_case(directory, words)
            elif words[0] == "metric":
                metric_words = words
            elif words[0] == "values":
                values = {words[i]: float(words[i + 1]) for i in range(1, len(words), 2)}
        check(metric_words is not None and len(values) == 3, "the driver wrote the metric case and its three values")
        if metric_words is not None:
            metric_case(directory, metric_words, values)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
