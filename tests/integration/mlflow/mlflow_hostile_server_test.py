"""[logging.mlflow] against fake MLflow servers that misbehave, and what a run writes (issue 58).

A fake server in this file speaks the few REST calls a run makes (experiments/get-by-name,
runs/create, runs/get, runs/log-batch, runs/update, the artifact proxy's PUT) and records every
request; a mode makes it hostile. Each case trains the quickstart for two steps (about a second):

1. credentials: a password in logging.mlflow.tracking_uri (via --set) reaches the server as basic
   authentication, and never a file of the run directory (config.toml, runtime.toml, train.log,
   mlflow/state.toml, every checkpoint), the console, a param, a tag or an uploaded artifact;
   TP_MY_TOKEN and TORCH_TOKEN are recorded by name only; `host mlflow-sync` from the redacted
   config.toml authenticates with the environment's credentials;
1b. a password with an unencoded '#', '?' or '/', or a URI without http:// (security trial F4):
   refused at load (exit 2) from --set, TP_LOGGING_MLFLOW_TRACKING_URI and MLFLOW_TRACKING_URI,
   shown redacted, nothing written; percent-encoded it trains, and no file of the run holds it;
2. a state file naming another server: `host mlflow-sync` and `host eval --mlflow` refuse (exit 2,
   naming the file and both servers) and send that server nothing, the token least of all;
3. a server that drips its answer to an artifact upload: `host train` ends within
   finish_timeout_seconds plus a small bound, and says what the server lacks (the client's limits
   themselves, mlflow-sync's included, are tracking_unit_tests' mlflow_http_test.cpp);
4. a server that answers with 1 GiB: refused at start-up (exit 2, naming the cap), the host's
   peak memory far below the answer;
5. a server answering 200 with a web page: "not an MLflow tracking server", not a credentials
   refusal, and no raw byte of it on the console;
5b. a server answering with JSON nested 200,000 deep: the same, not a stack overflow (a crash);
6. records_sent set past history.jsonl's records: mlflow-sync refuses (exit 2) instead of reporting
   success while sending nothing;
7. a stop signal and a server that is down, silent or dripping (ops trial, finding 2: a preempted
   job exited 60-86 s after SIGTERM, past SLURM's 30 s grace, and a finished run waited out the
   whole finish_timeout_seconds against a refused connection): with finish_timeout_seconds = 60,
   a finished run beside a server that is down ends at once; SIGTERM during training beside a
   dripping server exits 143 within the stopped end's 5 s and records KILLED, which the server got
   before the artifacts it drips; SIGTERM during the
   start-up request to a silent server exits 143 at once, before a step is trained.

Usage: mlflow_hostile_server_test.py <host> <source dir> <work dir>. Standard library only; about
30 s.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from fake_mlflow import Fake

HOST, SOURCE, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []

PASSWORD = "s3cret-Pa55"
ENV_SECRETS = {"TP_MY_TOKEN": "env-secret-one", "TORCH_TOKEN": "env-secret-two"}
TOKEN = "tracking-token-xyz"


def check(ok, message, detail=""):
    print(("ok   " if ok else "FAIL ") + message + ("" if ok or not detail else "\n" + detail), flush=True)
    if not ok:
        failures.append(message)


def environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(extra)
    return env


def train_args(run_dir, uri, *extra):
    return [HOST, "train", "--config", os.path.join(SOURCE, "configs", "quickstart.toml"), "--output-dir", run_dir,
            "--set", "train.epochs=1", "--set", "data.train.size=128", "--set", "data.train.val_size=64",
            "--set", "logging.mlflow.enabled=true", "--set", f'logging.mlflow.tracking_uri="{uri}"',
            "--set", "logging.mlflow.flush_seconds=0.2", "--set", "logging.mlflow.timeout_seconds=2",
            "--set", "logging.mlflow.finish_timeout_seconds=2", *extra]


def run(args, env=None, timeout=60):
    """(exit code or None when killed at `timeout`, stdout + stderr, seconds, peak RSS in MiB)."""
    started = time.time()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env or environment())
    out = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)
    reader.start()
    deadline = started + timeout
    while time.time() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            reader.join()
            code = os.waitstatus_to_exitcode(status)
            process.returncode = code
            return code, out[0].decode(errors="replace"), time.time() - started, usage.ru_maxrss / 1024
        time.sleep(0.05)
    process.kill()
    process.wait()
    reader.join()
    return None, out[0].decode(errors="replace") if out else "", time.time() - started, 0


def run_and_signal(args, ready, timeout=60):
    """Starts `args`, sends SIGTERM once `ready()` holds: (exit code, output, seconds from the
    signal to the exit, whether the signal was sent)."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment())
    out = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)
    reader.start()
    deadline = time.time() + timeout
    while process.poll() is None and not ready() and time.time() < deadline:
        time.sleep(0.02)
    signalled = process.poll() is None
    signalled_at = time.time()
    if signalled:
        process.terminate()
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        code = None
    reader.join()
    return code, out[0].decode(errors="replace") if out else "", time.time() - signalled_at, signalled


def history_lines(run_dir):
    try:
        with open(os.path.join(run_dir, "history.jsonl")) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def case_stop_and_outages(baseline):
    down = f"http://127.0.0.1:{free_port()}"
    long_end = ("--set", "logging.mlflow.finish_timeout_seconds=60")
    run_dir = os.path.join(WORK, "down")
    code, output, seconds, _ = run(train_args(run_dir, down, *long_end), timeout=90)
    check(code == 0, f"server down: trained, exit {code}", output[-1500:])
    # Each bound below sits halfway or less to the wait it tells apart (60 s, 30 s), leaving a loaded
    # CI machine room: a timed bound of a few seconds failed there once.
    check(seconds < baseline + 20, f"server down: ended {seconds:.1f} s after the start ({baseline:.1f} s beside a "
          f"server that answers), not after finish_timeout_seconds = 60")
    check("the server lacks" in output and "host mlflow-sync" in output, "server down: the end says what to send later",
          output[-1500:])

    drip = Fake("drip")
    run_dir = os.path.join(WORK, "stopped_drip")
    longer = ("--set", "data.train.size=4096", "--set", "train.log_every_steps=1")
    code, output, after, signalled = run_and_signal(
        train_args(run_dir, drip.uri, "--set", "logging.mlflow.timeout_seconds=30", *long_end, *longer),
        lambda: history_lines(run_dir) >= 3)
    check(signalled and code == 143, f"SIGTERM beside a dripping server: exit {code} (143)", output[-1500:])
    check(after < 5 + 15, f"SIGTERM beside a dripping server: exited {after:.1f} s after the signal (the stopped "
          f"end waits 5 s, not finish_timeout_seconds = 60)")
    with open(os.path.join(run_dir, "mlflow", "state.toml")) as f:
        check(re.search(r"end_status = ['\"]KILLED['\"]", f.read()),
              "SIGTERM beside a dripping server: the state file records KILLED")
    with open(os.path.join(run_dir, "train.log")) as f:
        check("stopped by signal 15" in f.read(), "SIGTERM: train.log says the run stopped and where it saved")
    # The status goes before the artifacts the server drips: the run is not left RUNNING there.
    killed = [r for r in drip.requests if r[0] == "POST" and r[1].endswith("runs/update") and b"KILLED" in r[3]]
    check(len(killed) == 1, "SIGTERM beside a server that drips the artifacts: it got the status KILLED first",
          str([(r[0], r[1]) for r in drip.requests][-8:]))
    drip.stop()

    silent = Fake("silent")
    run_dir = os.path.join(WORK, "stopped_silent")
    code, output, after, signalled = run_and_signal(
        train_args(run_dir, silent.uri, "--set", "logging.mlflow.timeout_seconds=30"),
        lambda: len(silent.requests) >= 1)
    check(signalled and code == 143, f"SIGTERM during a silent server's start-up: exit {code} (143)", output[-1500:])
    check(after < 10, f"SIGTERM during a silent server's start-up: exited {after:.1f} s after the signal "
          f"(the start-up request may take timeout_seconds = 30)")
    check(not os.path.exists(os.path.join(run_dir, "checkpoints", "last.pt")) and history_lines(run_dir) == 0,
          "SIGTERM during start-up: no step trained, no checkpoint", output[-1500:])
    silent.stop()


def files_holding(directory, needles):
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            found += [f"{os.path.relpath(path, directory)}: {n}" for n in needles if n.encode() in data]
    return found


def case_credentials():
    server = Fake()
    run_dir = os.path.join(WORK, "credentials")
    uri = f"http://alice:{PASSWORD}@127.0.0.1:{server.port}"
    env = environment(**ENV_SECRETS, TP_TRAIN_LOG_EVERY_STEPS="1")
    code, output, seconds, _ = run(train_args(run_dir, uri, "--set", 'logging.mlflow.log_checkpoints="best"'), env)
    check(code == 0, f"credentials: trained, exit {code}", output[-1500:])
    secrets = [PASSWORD, *ENV_SECRETS.values()]
    leaked = files_holding(run_dir, secrets)
    check(not leaked, f"credentials: no file of the run directory holds a secret {leaked}")
    check(not [s for s in secrets if s in output], "credentials: the console shows none")
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    requests = server.requests
    check(requests and all(r[2].get("Authorization") == basic for r in requests),
          f"credentials: the URI's user-info is sent as basic authentication ({len(requests)} requests)")
    sent = b"".join(r[3] for r in requests) + "".join(r[1] for r in requests).encode()
    check(not [s for s in [PASSWORD, *ENV_SECRETS.values()] if s.encode() in sent],
          "credentials: no param, tag or artifact the server received holds a secret")
    check(b"TP_MY_TOKEN" in sent and b"(not recorded)" in sent, "credentials: TP_MY_TOKEN is sent by name only")
    check(any(r[0] == "PUT" and r[1].endswith("best.pt") for r in requests), "credentials: the checkpoint uploaded")
    with open(os.path.join(run_dir, "config.toml")) as f:
        config = f.read()
    check(f"tracking_uri = 'http://***@127.0.0.1:{server.port}'" in config,
          "credentials: config.toml holds the URI with its user-info redacted")
    with open(os.path.join(run_dir, "runtime.toml")) as f:
        runtime = f.read()
    check("TP_MY_TOKEN = '(not recorded)'" in runtime and "TP_TRAIN_LOG_EVERY_STEPS = '1'" in runtime,
          "credentials: runtime.toml records TP_MY_TOKEN by name, a config key's mirror with its value", runtime[-1500:])

    # mlflow-sync reads the redacted config.toml: the environment's credentials, to the same server.
    state_path = os.path.join(run_dir, "mlflow", "state.toml")
    with open(state_path) as f:
        state = f.read()
    with open(state_path, "w") as f:
        f.write(state.replace("status_sent = true", "status_sent = false"))
    before = len(server.requests)
    code, output, _, _ = run([HOST, "mlflow-sync", run_dir],
                             environment(MLFLOW_TRACKING_USERNAME="bob", MLFLOW_TRACKING_PASSWORD="pw-from-env"))
    check(code == 0, f"credentials: mlflow-sync from the redacted config.toml, exit {code}", output[-800:])
    later = server.requests[before:]
    bob = "Basic " + base64.b64encode(b"bob:pw-from-env").decode()
    check(later and all(r[2].get("Authorization") == bob for r in later),
          f"credentials: mlflow-sync authenticates with the environment's credentials ({len(later)} requests)")
    server.stop()
    return run_dir, seconds


def case_unencoded_password():
    """Security trial F4: a password with an unencoded '#', '?' or '/' (or a URI without http://) was
    taken for part of the host, so it was written in clear to config.toml, runtime.toml, every
    checkpoint, train.log, mlflow/state.toml, the TensorBoard events and the console. Now refused
    before anything is written, from --set and both environment variables; percent-encoded, the
    same password trains and reaches no file of the run."""
    server = Fake()
    at = f"@127.0.0.1:{server.port}"
    cases = [("hash", f"http://alice:pa#ss1{at}", {}, "pa#ss1"),
             ("query", f"http://alice:pa?ss2{at}", {}, "pa?ss2"),
             ("slash", f"http://alice:12/ss3{at}", {}, "12/ss3"),
             ("no_scheme", f"alice:passw4{at}", {}, "passw4"),
             ("mirror", None, {"TP_LOGGING_MLFLOW_TRACKING_URI": f"http://bob:en#v5{at}"}, "en#v5"),
             ("mlflow_env", "", {"MLFLOW_TRACKING_URI": f"http://carol:en/v6{at}"}, "en/v6")]
    for name, uri, env, secret in cases:
        run_dir = os.path.join(WORK, "unencoded_" + name)
        args = train_args(run_dir, uri or "", "--set", "logging.tensorboard=true")
        if uri is None:  # the environment's mirror, which a --set would override
            i = args.index('logging.mlflow.tracking_uri=""')
            del args[i - 1:i + 1]
        code, output, _, _ = run(args, environment(**env))
        check(code == 2 and "%23" in output and "***" + at in output,
              f"unencoded password ({name}): refused at load, exit {code} (2), shown redacted", output[-800:])
        check(secret not in output, f"unencoded password ({name}): the console does not show it")
        written = [os.path.join(r, f) for r, _, fs in os.walk(run_dir) for f in fs] if os.path.isdir(run_dir) else []
        check(not written, f"unencoded password ({name}): nothing was written {written[:5]}")
    check(not server.requests, f"unencoded password: the server received nothing ({len(server.requests)} requests)")

    # Percent-encoded, it trains; no file the run writes holds it, encoded or not.
    run_dir = os.path.join(WORK, "encoded_password")
    encoded, plain = "pa%23s%3Fs%2F1", "pa#s?s/1"
    code, output, _, _ = run(train_args(run_dir, f"http://alice:{encoded}{at}", "--set", "logging.tensorboard=true",
                                        "--set", 'logging.mlflow.log_checkpoints="best"'))
    check(code == 0, f"encoded password: trained, exit {code}", output[-1500:])
    leaked = files_holding(run_dir, [encoded, plain])
    check(not leaked and os.path.isdir(os.path.join(run_dir, "tensorboard")),
          f"encoded password: no file of the run directory holds it, TensorBoard's included {leaked}")
    check(encoded not in output and plain not in output, "encoded password: the console shows none")
    basic = "Basic " + base64.b64encode(f"alice:{plain}".encode()).decode()
    check(server.requests and all(r[2].get("Authorization") == basic for r in server.requests),
          "encoded password: sent decoded as basic authentication")
    server.stop()


def case_other_server(run_dir):
    good, evil = Fake(), Fake()
    state_path = os.path.join(run_dir, "mlflow", "state.toml")
    with open(state_path) as f:
        state = f.read()
    edited = re.sub(r"tracking_uri = '[^']*'", f"tracking_uri = '{evil.uri}'", state)
    edited = edited.replace("status_sent = true", "status_sent = false")
    with open(state_path, "w") as f:
        f.write(edited)
    config_uri = f"http://127.0.0.1:{good.port}"
    with open(os.path.join(run_dir, "config.toml")) as f:
        config = f.read()
    with open(os.path.join(run_dir, "config.toml"), "w") as f:
        f.write(re.sub(r"tracking_uri = '[^']*'", f"tracking_uri = '{config_uri}'", config))
    env = environment(MLFLOW_TRACKING_TOKEN=TOKEN)
    code, output, _, _ = run([HOST, "mlflow-sync", run_dir], env)
    check(code == 2 and "state.toml" in output and evil.uri in output and config_uri in output,
          f"other server: mlflow-sync refuses, exit {code} (2), naming the file and both servers", output[-800:])
    code, output, _, _ = run([HOST, "eval", "--config", os.path.join(run_dir, "config.toml"), "--mlflow"], env)
    check(code == 2 and "state.toml" in output and evil.uri in output,
          f"other server: eval --mlflow refuses, exit {code} (2)", output[-800:])
    check(not evil.requests, f"other server: it received nothing ({len(evil.requests)} requests)")
    check(not good.requests, "other server: nothing was sent to the configured one either")
    with open(state_path, "w") as f:
        f.write(state)  # as it was
    good.stop()
    evil.stop()


def case_drip(baseline):
    server = Fake("drip")
    run_dir = os.path.join(WORK, "drip")
    # A request's own limit (timeout_seconds) is long here: the end's wait is what cuts the upload.
    code, output, seconds, _ = run(train_args(run_dir, server.uri, "--set", "logging.mlflow.timeout_seconds=30"),
                                   timeout=40)
    check(code == 0, f"dripping server: training ended, exit {code}", output[-1500:])
    # The end waits finish_timeout_seconds = 2, then abandons the upload within about a second.
    # Halfway to the request's own timeout_seconds = 30, room for a loaded machine.
    check(seconds < baseline + 2 + 12,
          f"dripping server: {seconds:.1f} s in all, {baseline:.1f} s beside a server that answers, "
          f"finish_timeout_seconds = 2")
    check("the server lacks" in output and "the artifacts" in output and "finish_timeout_seconds = 2 s" in output
          and "host mlflow-sync" in output, "dripping server: the end says what was left unsent, and why", output[-1500:])
    server.stop()


def case_huge():
    server = Fake("huge")
    run_dir = os.path.join(WORK, "huge")
    code, output, seconds, peak_mib = run(train_args(run_dir, server.uri), timeout=60)
    check(code == 2 and "larger than 8 MiB" in output and server.uri in output,
          f"huge answer: refused at start-up, exit {code} (2), naming the cap and the server", output[-800:])
    check(peak_mib < 600, f"huge answer: the host's peak memory {peak_mib:.0f} MiB, the answer 1024 MiB")
    check(not os.path.exists(os.path.join(run_dir, "checkpoints")), "huge answer: nothing trained")
    server.stop()


def case_html():
    server = Fake("html")
    run_dir = os.path.join(WORK, "html")
    code, output, _, _ = run(train_args(run_dir, server.uri))
    check(code == 2 and "not an MLflow tracking server" in output,
          f"web page: exit {code} (2), said to be no MLflow server", output[-800:])
    check("MLFLOW_TRACKING_TOKEN" not in output and "refused" not in output, "web page: not called a refusal")
    check("\x1b" not in output and "\x07" not in output and "\\x1b[2J" in output and len(output) < 20000,
          "web page: a short printable excerpt, no raw terminal bytes")
    server.stop()


def case_deep():
    # Before, copying the run's "info" recursed 200,000 frames deep: the host died of SIGSEGV.
    server = Fake("deep")
    run_dir = os.path.join(WORK, "deep")
    code, output, _, _ = run(train_args(run_dir, server.uri))
    check(code == 2 and "not an MLflow tracking server" in output,
          f"answer nested 200,000 deep: exit {code} (2), said to be no MLflow server's JSON", output[-800:])
    server.stop()


def case_records_sent():
    server = Fake()
    run_dir = os.path.join(WORK, "records")
    code, output, _, _ = run(train_args(run_dir, server.uri))
    check(code == 0, f"records_sent: trained, exit {code}", output[-800:])
    state_path = os.path.join(run_dir, "mlflow", "state.toml")
    with open(state_path) as f:
        state = f.read()
    with open(state_path, "w") as f:
        f.write(re.sub(r"records_sent = \d+", "records_sent = 999", state).replace("status_sent = true",
                                                                                   "status_sent = false"))
    before = len(server.requests)
    code, output, _, _ = run([HOST, "mlflow-sync", run_dir])
    check(code == 2 and "999" in output and "history.jsonl" in output,
          f"records_sent: mlflow-sync refuses, exit {code} (2), naming both counts", output[-800:])
    check(len(server.requests) == before, "records_sent: nothing sent")
    server.stop()


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    started = time.time()
    run_dir, baseline = case_credentials()
    case_other_server(run_dir)
    case_unencoded_password()
    case_drip(baseline)
    case_huge()
    case_html()
    case_deep()
    case_records_sent()
    case_stop_and_outages(baseline)
    print(f"{len(failures)} failure(s) in {time.time() - started:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
