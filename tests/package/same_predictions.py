"""Checks that each program's output (lines "path<TAB>class<TAB>probability", the inference
library's template programs) equals `host predict --images`'s csv on the same files: the same
paths in the same order, the same class names, and the same probabilities as float32 values
(both sides print a float's shortest text; comparing the values, not the text, makes the check
independent of how each formats it). Exits 1 naming the first difference.

    same_predictions.py PREDICT_CSV OUTPUT...
"""
import csv
import struct
import sys


def as_float32(text: str) -> float:
    return struct.unpack("<f", struct.pack("<f", float(text)))[0]


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: same_predictions.py PREDICT_CSV OUTPUT...")
    with open(sys.argv[1], newline="") as f:
        expected = [(row["path"], row["logits.class"], as_float32(row["logits.prob"])) for row in csv.DictReader(f)]
    if not expected:
        sys.exit(f"{sys.argv[1]}: host predict wrote no rows")
    for output in sys.argv[2:]:
        with open(output) as f:
            got = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        if len(got) != len(expected):
            sys.exit(f"{output}: {len(got)} lines, host predict has {len(expected)} rows")
        for number, (want, line) in enumerate(zip(expected, got), start=1):
            if len(line) != 3 or (line[0], line[1], as_float32(line[2])) != want:
                sys.exit(f"{output} line {number}: {line}, host predict: {list(want)}")
        print(f"{output}: {len(got)} images, the classes and probabilities of host predict --images")


if __name__ == "__main__":
    main()
