"""Reads a run's TensorBoard events with TensorBoard's own reader and checks them against the run.

    tensorboard_oracle.py RUN_DIR [REFERENCE_RUN_DIR]

TensorBoard's EventAccumulator (keeping every event: size guidance 0) must show:
  - every value of every history.jsonl record, as scalar <name> (step records) or <kind>/<name>
    (other kinds) at the record's step, equal in float32, in the order of the history, no step of
    any tag twice, and no scalar tag besides them and final/<name>;
  - the config as text: config.toml of the run, verbatim, in a TOML code block;
  - the hparams plugin's session start with every scalar of config.toml, the experiment naming the
    final/<name> tags as its metrics, the session end (success), each once; final/<name> equal to
    the run's last evaluation;
  - every image tag once per step, each a PNG of the plots' size.
With REFERENCE_RUN_DIR (a run that was never interrupted), the scalar series that do not measure
time or memory must equal the reference's history. Prints "ok <tags> <values>"; exits 1 with the
first difference otherwise.
"""
import json
import math
import pathlib
import sys
import tomllib

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2, metadata as hparams_metadata

MEASURED = ("time/", "throughput/", "memory/", "perf/")


def fail(message):
    print("tensorboard oracle: " + message)
    sys.exit(1)


def history_series(run_dir):
    """{tag: [(step, value or None)]} from history.jsonl, in file order."""
    series = {}
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        record = json.loads(line)
        kind = record.pop("kind")
        if "step" not in record:
            continue
        for name, value in record.items():
            tag = name if kind == "step" else kind + "/" + name
            series.setdefault(tag, []).append((int(record["step"]), value))
    return series


def same_value(expected, actual):
    if expected is None:  # NaN or Inf in training, null in the history
        return not math.isfinite(actual)
    return float(np.float32(expected)) == actual


def flatten(table, prefix, out):
    for key, value in table.items():
        name = prefix + key
        if isinstance(value, dict):
            flatten(value, name + ".", out)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                flatten(item, f"{name}[{i}].", out)
        else:
            out[name] = value


def check_scalars(acc, history):
    tags = set(acc.Tags()["scalars"])
    final_tags = {t for t in tags if t.startswith("final/")}
    if tags - final_tags != set(history):
        fail(f"scalar tags differ from the history: only in TensorBoard {sorted(tags - final_tags - set(history))}, "
             f"only in the history {sorted(set(history) - tags)}")
    values = 0
    for tag, expected in history.items():
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if len(steps) != len(set(steps)):
            fail(f"{tag}: a step is there twice: {steps}")
        if steps != [s for s, _ in expected]:
            fail(f"{tag}: steps {steps}, the history has {[s for s, _ in expected]}")
        for event, (_, value) in zip(events, expected):
            if not same_value(value, event.value):
                fail(f"{tag} at step {event.step}: {event.value} in TensorBoard, {value} in the history")
            values += 1
    return final_tags, values


def single_tensor(acc, tag):
    if tag not in acc.Tags()["tensors"]:
        fail(f"no {tag} in the tensors {acc.Tags()['tensors']}")
    events = acc.Tensors(tag)
    if len(events) != 1:
        fail(f"{tag} is there {len(events)} times")
    return events[0]


def check_config_and_hparams(acc, run_dir, final_tags, history):
    config_text = (run_dir / "config.toml").read_text()
    text = single_tensor(acc, "config")
    if acc.SummaryMetadata("config").plugin_data.plugin_name != "text":
        fail("the config is not a text-plugin summary")
    if text.tensor_proto.string_val[0].decode() != "```toml\n" + config_text + "```":
        fail("the config text is not config.toml in a TOML code block")

    def content(tag):
        single_tensor(acc, tag)
        metadata = acc.SummaryMetadata(tag)
        if metadata.plugin_data.plugin_name != "hparams":
            fail(f"{tag} is not an hparams-plugin summary")
        return metadata.plugin_data.content

    start = hparams_metadata.parse_session_start_info_plugin_data(content(hparams_metadata.SESSION_START_INFO_TAG))
    expected = {}
    flatten(tomllib.loads(config_text), "", expected)
    if set(start.hparams) != set(expected):
        fail(f"hparams keys differ from config.toml's: {sorted(set(start.hparams) ^ set(expected))}")
    for name, value in expected.items():
        got = start.hparams[name]
        kind = got.WhichOneof("kind")
        ok = (kind == "bool_value" and got.bool_value is value) if isinstance(value, bool) else \
             (kind == "number_value" and got.number_value == float(value)) if isinstance(value, (int, float)) else \
             (kind == "string_value" and got.string_value == value) if isinstance(value, str) else \
             (kind == "string_value" and got.string_value.startswith("["))  # arrays as their TOML text
        if not ok:
            fail(f"hparam {name}: {got} for {value!r} in config.toml")

    experiment = hparams_metadata.parse_experiment_plugin_data(content(hparams_metadata.EXPERIMENT_TAG))
    if {m.name.tag for m in experiment.metric_infos} != final_tags or not final_tags:
        fail(f"experiment metrics {[m.name.tag for m in experiment.metric_infos]} are not the final/* tags {final_tags}")
    if {h.name for h in experiment.hparam_infos} != set(expected):
        fail("the experiment's hparams are not the session's")
    end = hparams_metadata.parse_session_end_info_plugin_data(content(hparams_metadata.SESSION_END_INFO_TAG))
    if end.status != api_pb2.STATUS_SUCCESS:
        fail(f"session end status {end.status}")

    # final/<name> is the run's last evaluation, and the last epoch's train/loss.
    for tag in final_tags:
        name = tag[len("final/"):]
        source = "epoch/" + name
        if source not in history:
            fail(f"{tag} has no epoch series {source} to come from")
        last = acc.Scalars(tag)
        if len(last) != 1 or not same_value(history[source][-1][1], last[0].value):
            fail(f"{tag}: {[e.value for e in last]}, the last {source} is {history[source][-1][1]}")


def check_images(acc):
    for tag in acc.Tags()["images"]:
        events = acc.Images(tag)
        steps = [e.step for e in events]
        if len(steps) != len(set(steps)):
            fail(f"image {tag}: a step is there twice: {steps}")
        for e in events:
            if not e.encoded_image_string.startswith(b"\x89PNG") or (e.width, e.height) != (1000, 600):
                fail(f"image {tag} at step {e.step} is not a 1000 x 600 PNG")
    return len(acc.Tags()["images"])


def main():
    run_dir = pathlib.Path(sys.argv[1])
    files = sorted((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    if len(files) != 1:
        fail(f"expected one event file, found {files}")
    acc = event_accumulator.EventAccumulator(
        str(run_dir / "tensorboard"),
        size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0, event_accumulator.IMAGES: 0})
    acc.Reload()
    history = history_series(run_dir)
    final_tags, values = check_scalars(acc, history)
    check_config_and_hparams(acc, run_dir, final_tags, history)
    images = check_images(acc)
    if len(sys.argv) > 2:  # the same run, never interrupted
        reference = history_series(pathlib.Path(sys.argv[2]))
        for tag, series in reference.items():
            if tag.split("/", 1)[-1].startswith(MEASURED) or tag.startswith(MEASURED):
                continue
            got = [(e.step, e.value) for e in acc.Scalars(tag)]
            if len(got) != len(series) or any(s != g[0] or not same_value(v, g[1]) for (s, v), g in zip(series, got)):
                fail(f"{tag} differs from the uninterrupted run: {got} against {series}")
    print(f"ok {len(history)} {values} images {images}")


main()
