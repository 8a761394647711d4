"""A stand-in inference replica for the service tests: a real HTTP server process (stdlib
only, so it runs under any Python) on ``$PORT`` with the replica contract gpupool reads:
``GET /health`` (503 until ``READY_AFTER`` seconds after start), ``GET /metrics`` in the
Prometheus text format, ``POST /infer`` taking ``0.1 s + tokens ms`` and ``POST /crash``,
which kills the process at once (a replica dying under load)."""

REPLICA = r"""
import http.server, json, os, threading, time
port = int(os.environ["PORT"])
started = time.time()
ready_after = float(os.environ.get("READY_AFTER", "0.5"))
lock = threading.Lock()
stats = {"total": 0, "inflight": 0}

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body, kind="text/plain"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.send(200 if time.time() - started >= ready_after else 503, "ok")
        elif self.path == "/metrics":
            with lock:
                total, inflight = stats["total"], stats["inflight"]
            self.send(200, "# TYPE gpupool_replica_requests counter\n"
                      f"gpupool_replica_requests_total {total}\n"
                      "# TYPE gpupool_replica_requests_in_flight gauge\n"
                      f"gpupool_replica_requests_in_flight {inflight}\n")
        else:
            self.send(404, "no such page")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/crash":
            os._exit(3)
        with lock:
            stats["inflight"] += 1
        time.sleep(min(2.0, 0.1 + 0.001 * body.get("tokens", 0)))
        with lock:
            stats["inflight"] -= 1
            stats["total"] += 1
        self.send(200, json.dumps({"port": port}), "application/json")

http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""
