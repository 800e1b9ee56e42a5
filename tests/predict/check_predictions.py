"""Oracle of `host predict` (tests/predict/predict_test.cpp): reads the csv, jsonl and npy files
of one prediction, checks they hold the same rows, in dataset order, with argmax and softmax
probability consistent with the logits, and recomputes the accuracy `host eval` reported.

usage: check_predictions.py ROWS ACCURACY|- CSV [JSONL] [NPY]
Prints `ok <accuracy>`; exits 1 with the reason otherwise."""
import csv
import json
import sys

import numpy as np
import torch


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def main():
    rows, expected, csv_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jsonl_path = sys.argv[4] if len(sys.argv) > 4 else None
    npy_path = sys.argv[5] if len(sys.argv) > 5 else None
    with open(csv_path, newline="") as f:
        table = list(csv.DictReader(f))
    if len(table) != rows:
        fail(f"{len(table)} rows, expected {rows}")
    index = np.array([int(r["index"]) for r in table])
    if not (index == np.arange(rows)).all():
        fail("rows are not in dataset order 0..n-1")
    classes = sorted(int(k.split(".")[1]) for k in table[0] if k.startswith("logits.") and k.split(".")[1].isdigit())
    logits = np.array([[float(r[f"logits.{c}"]) for c in classes] for r in table], dtype=np.float32)
    argmax = np.array([int(r["logits.argmax"]) for r in table])
    prob = np.array([float(r["logits.prob"]) for r in table], dtype=np.float32)
    label = np.array([int(r["label"]) for r in table])
    if not (argmax == logits.argmax(1)).all():
        fail("logits.argmax differs from the argmax of the logits columns")
    softmax = torch.softmax(torch.from_numpy(logits), 1).max(1).values.numpy()
    if not np.allclose(prob, softmax, rtol=1e-5, atol=1e-7):
        fail(f"logits.prob differs from softmax: max diff {np.abs(prob - softmax).max()}")
    accuracy = float((argmax == label).mean())
    if expected != "-" and abs(accuracy - float(expected)) > 1e-6:
        fail(f"accuracy {accuracy!r} from the file, host eval said {expected}")
    if jsonl_path:
        with open(jsonl_path) as f:
            lines = [json.loads(line) for line in f]
        if [l["index"] for l in lines] != list(range(rows)):
            fail("jsonl rows are not in dataset order")
        if not (np.array([l["logits"] for l in lines], dtype=np.float32) == logits).all():
            fail("jsonl logits differ from the csv's")
        if [l["label"] for l in lines] != label.tolist() or [l["logits.argmax"] for l in lines] != argmax.tolist():
            fail("jsonl labels or argmax differ from the csv's")
    if npy_path:
        records = np.load(npy_path)
        if records.shape != (rows,):
            fail(f"npy shape {records.shape}")
        if not (records["index"] == index).all() or not (records["label"] == label).all():
            fail("npy index or label differ from the csv's")
        if not (records["logits"] == logits).all() or not (records["logits.prob"] == prob).all():
            fail("npy logits or prob differ from the csv's")
    print("ok", accuracy)


main()
