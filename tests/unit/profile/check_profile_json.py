"""Checks a profile.json written by `host profile` / tp::profile_json: every documented field is
present and the per-sample and per-batch numbers agree.

usage: check_profile_json.py FILE PARAMETERS BATCH_SIZE [NOT_RUN_ROWS]   (prints "ok" or fails)
NOT_RUN_ROWS (default 0): how many latency rows must be not-run rows (device, precision, error).
"""
import json
import math
import sys


def close(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def main(path, parameters, batch, not_run=0):
    p = json.load(open(path))
    for key in ("model", "batch_size", "input_source", "inputs", "parameters", "size_bytes", "size_mb",
                "checkpoint_bytes", "checkpoint_mb", "flops", "macs", "flops_by_op", "latency"):
        assert key in p, f"missing {key}"
    assert p["batch_size"] == batch, p["batch_size"]
    assert p["parameters"]["total"] == parameters, p["parameters"]
    assert p["parameters"]["trainable"] <= p["parameters"]["total"]
    for shape in p["inputs"].values():
        assert shape[0] == batch, shape
    assert close(p["size_mb"], p["size_bytes"] / 1e6) and close(p["checkpoint_mb"], p["checkpoint_bytes"] / 1e6)
    assert p["flops"]["per_batch"] > 0
    assert close(p["flops"]["per_sample"] * batch, p["flops"]["per_batch"])
    assert close(p["macs"]["per_batch"], p["flops"]["per_batch"] / 2)
    assert close(p["macs"]["per_sample"], p["flops"]["per_sample"] / 2)
    assert sum(op["flops"] for op in p["flops_by_op"]) == p["flops"]["per_batch"]
    assert p["latency"], "no latency rows"
    errors = [row for row in p["latency"] if "error" in row]
    assert len(errors) == not_run, errors
    for row in errors:
        assert sorted(row) == ["device", "error", "precision"] and row["error"], row
    assert len(errors) < len(p["latency"]), "no row ran"
    for row in p["latency"]:
        if "error" in row:
            continue
        for key in ("device", "precision", "iterations", "batch_ms", "sample_ms", "samples_per_s", "peak_memory_mb"):
            assert key in row, f"latency row lacks {key}"
        for stat in ("mean", "p50", "p90", "p99", "min", "max"):
            assert close(row["sample_ms"][stat] * batch, row["batch_ms"][stat]), (stat, row)
        b = row["batch_ms"]
        assert b["min"] <= b["p50"] <= b["p90"] <= b["p99"] <= b["max"], b
        assert close(row["samples_per_s"], 1000.0 * batch / b["mean"], rel=1e-6), row
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
