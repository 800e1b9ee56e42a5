"""A fake MLflow tracking server for mlflow_hostile_server_test.py: the REST calls a run makes,
answered well or, by its mode, as a hostile server would (dripping, silent, huge, a web page, JSON
nested 200,000 deep); every request recorded. Standard library only."""
import http.server
import json
import threading
import time


class FakeMlflow(http.server.BaseHTTPRequestHandler):
    """The REST calls a run makes; `self.server.mode` makes it hostile; every request recorded."""
    protocol_version = "HTTP/1.1"  # answers Expect: 100-continue at once

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def record(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.requests.append((self.command, self.path, dict(self.headers), body))
        return body

    def run_json(self):
        return json.dumps({"run": {"info": {
            "run_id": "r1", "experiment_id": "1", "artifact_uri": "mlflow-artifacts:/1/r1/artifacts",
            "status": "RUNNING", "lifecycle_stage": "active"}}}).encode()

    def drip(self):
        # Headers promising a long answer, then a byte every 0.3 s until the client goes (or 60 s).
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n")
        self.close_connection = True
        until = time.time() + 60
        try:
            while time.time() < until:
                self.wfile.write(b"{")
                self.wfile.flush()
                time.sleep(0.3)
        except OSError:
            pass

    def huge(self):
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (1 << 30))
        self.close_connection = True
        chunk = b"{" * (1 << 20)
        try:
            for _ in range(1024):
                self.wfile.write(chunk)
        except OSError:
            pass

    def do_GET(self):
        self.record()
        mode = self.server.mode
        if mode == "silent":  # takes the connection and never answers
            time.sleep(60)
            return
        if "experiments/get-by-name" in self.path:
            if mode == "huge":
                return self.huge()
            if mode == "html":
                return self.reply(200, b"<html><body>\x1b[2J\x1b]0;owned\x07Please sign in\r\n" + b"x" * 5000 +
                                  b"</body></html>", "text/html")
            return self.reply(200, json.dumps({"experiment": {"experiment_id": "1",
                                                              "lifecycle_stage": "active"}}).encode())
        if "runs/get" in self.path:
            return self.reply(200, self.run_json())
        self.reply(404, b'{"error_code": "ENDPOINT_NOT_FOUND"}')

    def do_POST(self):
        self.record()
        if self.path.endswith("runs/create"):
            if self.server.mode == "deep":  # 600 kB of JSON nested 200,000 deep, built by hand (json.dumps recurses)
                return self.reply(200, b'{"run": {"info": ' + b"[" * 200000 + b"1" + b"]" * 200000 + b"}}")
            return self.reply(200, self.run_json())
        self.reply(200, b"{}")

    def do_PUT(self):
        self.record()
        if self.server.mode == "drip":
            return self.drip()
        self.reply(200, b"{}")


class Fake:
    def __init__(self, mode="ok"):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeMlflow)
        self.server.daemon_threads = True
        self.server.mode = mode
        self.server.requests = []
        self.server.lock = threading.Lock()
        self.port = self.server.server_address[1]
        self.uri = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def requests(self):
        with self.server.lock:
            return list(self.server.requests)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
