"""[logging.mlflow] end to end, against a real MLflow tracking server read back with MLflow's own client.

The test starts `mlflow server` (PyPI mlflow 3.17.2, in .venv-mlflow made by scripts/bench_setup) on
127.0.0.1 with a temporary SQLite backend store and artifact root, trains short runs of the
quickstart (configs/quickstart.toml, 1,280 samples) with tracking on, and reads every run back with
mlflow.tracking.MlflowClient:

1. a finished run: params equal config.toml's every leaf, tags (provenance, logging.mlflow.tags,
   the run's name), every metric equal to history.jsonl's value at its step, the artifacts byte for
   byte (the best checkpoint with log_checkpoints = "best"), status FINISHED; `host eval --mlflow` adds the evaluation's metrics to it;
2. a run stopped by SIGTERM (status KILLED) and continued with --resume auto: one MLflow run,
   FINISHED, no step twice in any metric's history;
2b. a run rewound to an earlier checkpoint and trained again with another setting (experiments
   trial F1): the steps after the checkpoint are sent again, so the latest value of every step
   (the later point, as MLflow's latest_metrics takes it) and the run's metrics equal the new
   history.jsonl, and state.toml's records_sent is its record count;
3. the server gone mid-run (connections refused): training ends (exit 0) about as fast as with the
   server up, and says what it could not send; once it is back, `host mlflow-sync` completes the run;
4. refusals at start-up, before anything trains (exit 2): a server answering 401 (a wrong token),
   a file: URI, an experiment name the server rejects;
5. a server that takes a second per request: training is not slowed, and everything arrives;
6. two ranks: one MLflow run, from rank 0;
7. a sweep of two cells: a parent run with the cells' runs as its children.

Usage: mlflow_tracking_test.py <host> <source dir> <work dir>
"""
import http.server
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request

from mlflow.tracking import MlflowClient

HOST, SOURCE, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message, flush=True)
    if not ok:
        failures.append(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`mlflow server` with its store under WORK/server (kept across restarts)."""

    def __init__(self):
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.dir = os.path.join(WORK, "server")
        os.makedirs(self.dir, exist_ok=True)
        self.process = None

    def start(self):
        mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        self.process = subprocess.Popen(
            [mlflow, "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", "sqlite:///" + os.path.join(self.dir, "store.db"),
             "--artifacts-destination", os.path.join(self.dir, "artifacts")],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise SystemExit("mlflow server did not start; see " + os.path.join(self.dir, "server.log"))

    def stop(self):
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()


def train_args(run_dir, uri, *extra, epochs=2):
    return [HOST, "train", "--config", os.path.join(SOURCE, "configs", "quickstart.toml"), "--output-dir", run_dir,
            "--set", f"train.epochs={epochs}", "--set", "data.train.size=640", "--set", "data.train.val_size=128",
            "--set", "train.log_every_steps=2", "--set", "logging.mlflow.enabled=true",
            "--set", f'logging.mlflow.tracking_uri="{uri}"', "--set", 'logging.mlflow.experiment="torchhost-test"',
            "--set", "logging.mlflow.flush_seconds=0.5", "--set", "plots.enabled=true", *extra]


def train(run_dir, uri, *extra, epochs=2):
    started = time.time()
    result = subprocess.run(train_args(run_dir, uri, *extra, epochs=epochs), capture_output=True, text=True)
    return result, time.time() - started


def state(run_dir):
    with open(os.path.join(run_dir, "mlflow", "state.toml"), "rb") as f:
        return tomllib.load(f)


def mlflow_key(name):
    return name.replace("[", ".").replace("]", "")


def leaves(table, prefix=""):
    for key, value in table.items():
        path = prefix + key
        if isinstance(value, dict):
            yield from leaves(value, path + ".")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                yield from leaves(item, f"{path}[{i}].")
        else:
            yield path, value


def same_value(text, value):
    """A param's text against config.toml's value: the same value, read back as TOML."""
    if isinstance(value, str):
        return text == value
    parsed = tomllib.loads("v = " + text)["v"]
    if isinstance(value, float) or isinstance(parsed, float):
        return float(parsed) == float(value)
    return parsed == value


def history(run_dir):
    with open(os.path.join(run_dir, "history.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def expected_metrics(records):
    series = {}
    for record in records:
        if record.get("step") is None:
            continue
        for name, value in record.items():
            if name in ("kind", "step"):
                continue
            key = name if record["kind"] == "step" else record["kind"] + "/" + name
            series.setdefault(mlflow_key(key), []).append((int(record["step"]), math.nan if value is None else value))
    return series


def same_number(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def read_back(client, run_dir, label, status="FINISHED"):
    run_id = state(run_dir)["run_id"]
    run = client.get_run(run_id)
    check(run.info.status == status, f"{label}: status {run.info.status}, expected {status}")
    with open(os.path.join(run_dir, "config.toml"), "rb") as f:
        config = tomllib.load(f)
    params = run.data.params
    wrong = [p for p, v in leaves(config) if mlflow_key(p) not in params or not same_value(params[mlflow_key(p)], v)]
    check(not wrong and len(params) == len(list(leaves(config))),
          f"{label}: {len(params)} params equal config.toml's leaves (differing: {wrong[:5]})")
    expected = expected_metrics(history(run_dir))
    bad = []
    for key, points in expected.items():
        got = [(m.step, m.value) for m in client.get_metric_history(run_id, key)]
        got.sort(key=lambda p: p[0])
        if len(got) != len(points) or not all(g[0] == e[0] and same_number(g[1], e[1]) for g, e in zip(got, points)):
            bad.append(f"{key}: {len(got)} values, expected {len(points)}")
    check(not bad and expected, f"{label}: {sum(len(p) for p in expected.values())} values of {len(expected)} metrics "
          f"equal history.jsonl at their steps, none twice {bad[:3]}")
    check(set(run.data.metrics) == set(expected), f"{label}: the run's metric keys are history.jsonl's")
    return run


def check_latest_per_step(client, run_dir, first_attempt, label):
    """After a resume that trained steps again: the latest point of each step (the largest
    timestamp, as MLflow's latest_metrics takes it) is history.jsonl's value, and so is each of the
    run's metrics; some step held another value from the first attempt (else nothing was tested)."""
    run_id = state(run_dir)["run_id"]
    records = history(run_dir)
    expected = expected_metrics(records)
    stale, replaced = [], 0
    for key, points in expected.items():
        latest = {}
        for m in client.get_metric_history(run_id, key):
            if m.step not in latest or m.timestamp >= latest[m.step].timestamp:
                latest[m.step] = m
        for step, value in points:
            if step not in latest or not same_number(latest[step].value, value):
                stale.append(f"{key}@{step}: {latest[step].value if step in latest else None}, history {value}")
        old = dict(expected_metrics(first_attempt).get(key, []))
        replaced += sum(1 for step, value in points if step in old and not same_number(old[step], value))
    check(not stale and replaced > 0, f"{label}: the latest value of each step is history.jsonl's "
          f"({replaced} values the first attempt sent are replaced; stale: {stale[:3]})")
    metrics = client.get_run(run_id).data.metrics
    final = {key: points[-1][1] for key, points in expected.items()}
    wrong = [k for k, v in final.items() if k not in metrics or not same_number(metrics[k], v)]
    check(not wrong, f"{label}: the run's metrics are history.jsonl's last values (differing: {wrong[:3]})")
    check(state(run_dir)["records_sent"] == len(records),
          f"{label}: records_sent {state(run_dir)['records_sent']} is history.jsonl's {len(records)} records")


def check_artifacts(client, run_dir, label, names):
    target = os.path.join(WORK, "download-" + label)
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    differing = []
    for name in names:
        local = client.download_artifacts(state(run_dir)["run_id"], name, target)
        with open(local, "rb") as a, open(os.path.join(run_dir, name), "rb") as b:
            if a.read() != b.read():
                differing.append(name)
    check(not differing, f"{label}: artifacts {names} equal the run directory's files byte for byte {differing}")


class Stub(http.server.BaseHTTPRequestHandler):
    """A handler of the test's own servers: answers with `reply`, logs nothing."""

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Refusing(Stub):
    """A server that refuses every request as MLflow does a wrong token."""

    def refuse(self):
        self.reply(401, b'{"error_code": "UNAUTHENTICATED", "message": "You are not authenticated."}')

    do_GET = do_POST = do_PUT = refuse


class Forwarding(Stub):
    """Forwards to the real server, `delay` seconds late: a slow server, or (stopped) one that is gone."""
    target = ""
    delay = 0.0

    def forward(self):
        time.sleep(Forwarding.delay)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        request = urllib.request.Request(Forwarding.target + self.path, data=body, method=self.command,
                                         headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                self.reply(answer.status, answer.read())
        except urllib.error.HTTPError as e:
            self.reply(e.code, e.read())

    do_GET = do_POST = do_PUT = forward


def serve(handler, port=0):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop_serving(server):
    server.shutdown()
    server.server_close()


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    server = Server()
    server.start()
    try:
        return cases(server)
    finally:
        if server.process.poll() is None:  # also when a case raised: no server outlives the test
            server.stop()


def cases(server):
    client = MlflowClient(tracking_uri=server.uri)
    artifacts = ["config.toml", "runtime.toml", "history.jsonl", "history.csv", "plots/loss.png"]

    # 1. A finished run.
    run_dir = os.path.join(WORK, "finished")
    result, up_seconds = train(run_dir, server.uri, "--set", 'logging.mlflow.tags=["team=vision", "owner=ci"]',
                               "--set", 'logging.mlflow.log_checkpoints="best"')
    check(result.returncode == 0, f"finished run: exit {result.returncode} {result.stderr[-2000:]}")
    run = read_back(client, run_dir, "finished run")
    tags = run.data.tags
    check(tags.get("team") == "vision" and tags.get("owner") == "ci", "finished run: logging.mlflow.tags set")
    check(tags.get("mlflow.runName") == "quickstart", "finished run: named after run.name")
    check(tags.get("torchhost.run_id") == state(run_dir)["torchhost_run_id"], "finished run: run.id as a tag")
    provenance = [k for k in tags if k.startswith("torchhost.") and k != "torchhost.run_id"]
    check(len(provenance) >= 5, f"finished run: runtime.toml's provenance as {len(provenance)} tags")
    check_artifacts(client, run_dir, "finished", artifacts + ["checkpoints/best.pt"])
    check(os.path.exists(os.path.join(run_dir, "plots/loss.png")), "finished run: its plots were drawn")
    evaluation = subprocess.run([HOST, "eval", "--config", os.path.join(run_dir, "config.toml"), "--mlflow"],
                                capture_output=True, text=True)
    check(evaluation.returncode == 0, f"eval --mlflow: exit {evaluation.returncode} {evaluation.stderr[-1500:]}")
    with open(os.path.join(run_dir, "eval_best.json")) as f:
        written = json.load(f)
    logged = client.get_metric_history(state(run_dir)["run_id"], "eval/best/val/accuracy")
    check(len(logged) == 1 and logged[0].step == written["step"] and logged[0].value == written["val/accuracy"],
          f"eval --mlflow: eval/best/val/accuracy {[(m.step, m.value) for m in logged]} is eval_best.json's "
          f"{written['val/accuracy']} at step {written['step']}")

    # 2. SIGTERM, then --resume auto: one MLflow run.
    run_dir = os.path.join(WORK, "resumed")
    process = subprocess.Popen(train_args(run_dir, server.uri, epochs=3), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not os.path.exists(os.path.join(run_dir, "history.jsonl")) or
                                      len(history(run_dir)) < 8):
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate()
    check(process.returncode == 143, f"stopped run: exit {process.returncode} {stderr[-1500:]}")
    first = state(run_dir)["run_id"]
    check(client.get_run(first).info.status == "KILLED", "stopped run: status KILLED")
    result, _ = train(run_dir, server.uri, "--resume", "auto", epochs=3)
    check(result.returncode == 0, f"resumed run: exit {result.returncode} {result.stderr[-2000:]}")
    check(state(run_dir)["run_id"] == first, "resumed run: the same MLflow run continues")
    read_back(client, run_dir, "resumed run")

    # 2b. A rewind to the first epoch's checkpoint, retrained with gradient clipping: other values.
    run_dir = os.path.join(WORK, "rewound")
    keep = ("--set", "checkpoint.keep_last=3")
    result, _ = train(run_dir, server.uri, *keep, epochs=3)
    check(result.returncode == 0, f"rewound run, first attempt: exit {result.returncode} {result.stderr[-1500:]}")
    first_attempt = history(run_dir)
    result, _ = train(run_dir, server.uri, *keep, "--set", "train.max_grad_norm=0.05", "--resume",
                      os.path.join(run_dir, "checkpoints", "step-00000010.pt"), epochs=3)
    check(result.returncode == 0, f"rewound run: exit {result.returncode} {result.stderr[-1500:]}")
    check_latest_per_step(client, run_dir, first_attempt, "rewound run")

    # 3. The server goes away mid-run (the forwarder in front of it stops: connections are refused),
    #    then comes back, and mlflow-sync completes the run.
    Forwarding.target = server.uri
    forwarder, forwarder_uri = serve(Forwarding)
    port = forwarder.server_address[1]
    run_dir = os.path.join(WORK, "outage")
    process = subprocess.Popen(train_args(run_dir, forwarder_uri, "--set", "logging.mlflow.finish_timeout_seconds=3",
                                          "--set", "logging.mlflow.timeout_seconds=2"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.time()
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if state(run_dir)["records_sent"] > 0:
                break
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            pass
        time.sleep(0.1)
    stop_serving(forwarder)
    _, stderr = process.communicate()
    down_seconds = time.time() - started
    check(process.returncode == 0, f"outage: training finished, exit {process.returncode} {stderr[-1500:]}")
    check("the server lacks" in stderr and "host mlflow-sync" in stderr, "outage: the end says what was not sent")
    check(down_seconds < 1.5 * up_seconds + 3 + 2 + 10,
          f"outage: {down_seconds:.1f} s with the server gone, {up_seconds:.1f} s with it up (+ the 3 s end wait)")
    check(state(run_dir)["records_sent"] < len(history(run_dir)), "outage: the state file says what is missing")
    forwarder, _ = serve(Forwarding, port)
    sync = subprocess.run([HOST, "mlflow-sync", run_dir], capture_output=True, text=True)
    check(sync.returncode == 0, f"outage: mlflow-sync exit {sync.returncode} {sync.stderr[-1500:]}")
    read_back(client, run_dir, "outage, synced")
    check_artifacts(client, run_dir, "synced", ["config.toml", "history.jsonl"])
    stop_serving(forwarder)

    # 4. Refused at start-up, nothing trained.
    refusing, refusing_uri = serve(Refusing)
    for label, uri, extra, needle in [
            ("wrong token", refusing_uri, [], "MLFLOW_TRACKING_TOKEN"),
            ("file: URI", "file:///tmp/mlruns", [], "logging.mlflow.tracking_uri"),
            ("bad experiment name", server.uri, ["--set", 'logging.mlflow.experiment=""'], "logging.mlflow")]:
        run_dir = os.path.join(WORK, "refused-" + label.replace(" ", "-").replace(":", ""))
        result, _ = train(run_dir, uri, *extra)
        check(result.returncode == 2 and needle in result.stderr,
              f"{label}: refused at start-up, exit {result.returncode} (2), naming {needle} {result.stderr[-800:]}")
        check(not os.path.exists(os.path.join(run_dir, "checkpoints")), f"{label}: nothing trained")
    stop_serving(refusing)

    # 5. A server that takes a second per request.
    Forwarding.delay = 1.0
    slow, slow_uri = serve(Forwarding)
    run_dir = os.path.join(WORK, "slow")
    result, slow_seconds = train(run_dir, slow_uri, "--set", "plots.enabled=false")
    check(result.returncode == 0, f"slow server: exit {result.returncode} {result.stderr[-1500:]}")
    def step_ms(directory):
        with open(os.path.join(directory, "report.toml"), "rb") as f:
            report = tomllib.load(f)
        return sum(report[k] for k in ("data_wait_ms", "forward_ms", "backward_ms", "optimizer_ms"))
    fast_ms, slow_ms = step_ms(os.path.join(WORK, "finished")), step_ms(run_dir)
    check(slow_ms < 2 * fast_ms + 5, f"slow server: a step took {slow_ms:.1f} ms, {fast_ms:.1f} ms beside a fast "
          f"server ({slow_seconds:.1f} s and {up_seconds:.1f} s in all, the end's sending included)")
    read_back(client, run_dir, "slow server")
    stop_serving(slow)

    # 6. Two ranks: one MLflow run.
    experiment = client.get_experiment_by_name("torchhost-test").experiment_id
    before = len(client.search_runs([experiment]))
    run_dir = os.path.join(WORK, "two-ranks")
    args = train_args(run_dir, server.uri)
    result = subprocess.run([HOST, "--nproc-per-node", "2"] + args[1:], capture_output=True, text=True)
    check(result.returncode == 0, f"two ranks: exit {result.returncode} {result.stderr[-1500:]}")
    check(len(client.search_runs([experiment])) == before + 1, "two ranks: one MLflow run")
    read_back(client, run_dir, "two ranks")

    # 7. A sweep: one parent run, a child per cell.
    sweep_dir = os.path.join(WORK, "sweep")
    args = train_args(sweep_dir, server.uri)
    sweep = subprocess.run([HOST, "sweep"] + args[2:] + ["--grid", "optim.lr=0.003,0.001"], capture_output=True,
                           text=True)
    check(sweep.returncode == 0, f"sweep: exit {sweep.returncode} {sweep.stderr[-1500:]}")
    parent = state(sweep_dir)["run_id"]
    check(client.get_run(parent).info.status == "FINISHED", "sweep: the parent run FINISHED")
    children = client.search_runs([experiment], filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    cells = sorted(d for d in os.listdir(sweep_dir) if os.path.exists(os.path.join(sweep_dir, d, "config.toml")))
    check(len(children) == 2 and sorted(c.info.run_id for c in children) ==
          sorted(state(os.path.join(sweep_dir, d))["run_id"] for d in cells),
          f"sweep: the parent has the {len(cells)} cells' runs as children ({len(children)})")
    check(sorted(float(c.data.params["optim.lr"]) for c in children) == [0.001, 0.003], "sweep: each child its lr")
    check(sorted(c.data.tags["mlflow.runName"] for c in children) == cells, f"sweep: the children named {cells}")
    check(client.get_run(parent).data.tags["mlflow.runName"] == "sweep", "sweep: the parent named after its directory")
    for d in cells:
        read_back(client, os.path.join(sweep_dir, d), "sweep cell " + d)

    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
