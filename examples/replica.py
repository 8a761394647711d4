"""A minimal inference replica for gpupool services (stdlib only, any Python 3). Its clients'
port, $PORT (published by its node), serves POST /infer {"tokens": N}, which takes 0.1 s + N ms
(a stand-in for a model), and GET /health. What gpupool reads and asks is on its control port,
$GPUPOOL_CONTROL_PORT, which only its node's agent reaches (never published): GET /health (503
until READY_AFTER seconds after start, then 200), GET /metrics in the Prometheus text format
(gpupool_replica_requests_total, gpupool_replica_requests_in_flight), and parking as vLLM's
sleep mode answers it: POST /sleep?level=1 puts it to sleep (weights to host memory in vLLM;
here health and requests answer 503), POST /wake_up wakes it (WAKE_S seconds, 0.2 by default:
vLLM publishes 0.1-6 s), GET /is_sleeping says which; POST /crash kills it at once (to see a
replica replaced). Without $GPUPOOL_CONTROL_PORT (an agent older than control ports) all of it
is on $PORT. It listens on every address of its network namespace (its tenant's, walled from
other tenants), as model servers do; --env HOST=... changes that.

    gpupool service create chat --tenant inference --request gpu=1 \
        --metric concurrency --target 2 -- python3 -c "$(cat examples/replica.py)"
"""

import http.server
import json
import os
import threading
import time

port = int(os.environ["PORT"])
started = time.time()
ready_after = float(os.environ.get("READY_AFTER", "0.5"))
lock = threading.Lock()
stats = {"total": 0, "inflight": 0}
wake_s = float(os.environ.get("WAKE_S", "0.2"))
asleep = threading.Event()


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

    control = True  # the platform's endpoints too (one port, or the control port)

    def do_GET(self):
        if self.path != "/health" and not self.control:
            self.send(404, "no such page")
        elif self.path == "/health":
            awake = time.time() - started >= ready_after and not asleep.is_set()
            self.send(200 if awake else 503, "ok" if awake else "not ready")
        elif self.path == "/is_sleeping":
            self.send(200, json.dumps({"is_sleeping": asleep.is_set()}), "application/json")
        elif self.path == "/metrics":
            with lock:
                total, inflight = stats["total"], stats["inflight"]
            self.send(
                200,
                "# TYPE gpupool_replica_requests counter\n"
                f"gpupool_replica_requests_total {total}\n"
                "# TYPE gpupool_replica_requests_in_flight gauge\n"
                f"gpupool_replica_requests_in_flight {inflight}\n",
            )
        else:
            self.send(404, "no such page")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.split("?")[0] in ("/crash", "/sleep", "/wake_up") and not self.control:
            return self.send(404, "no such page")
        if self.path == "/crash":
            os._exit(3)
        if self.path.split("?")[0] == "/sleep":
            asleep.set()
            return self.send(200, "asleep")
        if self.path == "/wake_up":
            time.sleep(wake_s if asleep.is_set() else 0)
            asleep.clear()
            return self.send(200, "awake")
        if asleep.is_set():
            return self.send(503, "asleep")
        with lock:
            stats["inflight"] += 1
        time.sleep(min(2.0, 0.1 + 0.001 * body.get("tokens", 0)))
        with lock:
            stats["inflight"] -= 1
            stats["total"] += 1
        answer = {"port": port, "service": os.environ.get("GPUPOOL_SERVICE")}
        self.send(200, json.dumps(answer), "application/json")


class Clients(Handler):
    control = False  # the published port: what the replica serves, nothing of the platform's


host = os.environ.get("HOST", "0.0.0.0")
control_port = os.environ.get("GPUPOOL_CONTROL_PORT")
if control_port:
    control = http.server.ThreadingHTTPServer((host, int(control_port)), Handler)
    threading.Thread(target=control.serve_forever, daemon=True).start()
http.server.ThreadingHTTPServer((host, port), Clients if control_port else Handler).serve_forever()
