"""Health checks against hostile replicas on loopback: one that trickles its answer, one that
answers 2 MiB, one that answers garbage, one that is gone. Each is a clear reading, none
holds the reconciler past its deadline, none raises."""

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpupool.replicas.probe import probe


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "trickle"

    def log_message(self, *args):
        pass

    def handle(self):
        with contextlib.suppress(OSError):  # the check hung up: that is what it should do
            super().handle()

    def do_GET(self):
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            return
        self.send_response(200)
        if self.mode == "trickle":
            self.send_header("Content-Length", "1000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(1000):
                    self.wfile.write(b"#")
                    self.wfile.flush()
                    time.sleep(0.2)
        elif self.mode == "huge":
            body = b"# " + b"x" * (2 << 20) + b"\n"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the check stopped reading at 1 MiB
                self.wfile.write(body)
        else:
            body = b"gpupool_replica_requests_total{{{ nonsense\n"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


@pytest.fixture
def replica():
    servers = []

    def start(mode: str) -> str:
        handler = type("H", (Hostile,), {"mode": mode})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("trickle", "answer too slow"),
        ("huge", "answer larger than 1 MiB"),
        ("garbage", "metrics: not the Prometheus text format"),
    ],
)
def test_a_hostile_replica_is_a_clear_reading_within_the_deadline(replica, mode, error):
    started = time.monotonic()
    reading = probe(replica(mode), "/health", timeout=0.5)
    assert error in reading.error
    assert time.monotonic() - started < 3  # 2 x timeout for health, + 1 for metrics
    assert reading.requests_total is None


def test_a_replica_that_is_gone_is_not_ready():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reading = probe(f"127.0.0.1:{port}", "/health", timeout=0.5)
    assert not reading.ready and reading.error.startswith("health: ConnectError")


class Sleepy(BaseHTTPRequestHandler):
    """As vLLM in sleep mode: its health answers 200 while it sleeps; /is_sleeping says so."""

    protocol_version = "HTTP/1.1"
    asleep = True

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"ok"
        if self.path == "/is_sleeping":
            body = b'{"is_sleeping": true}' if self.asleep else b'{"is_sleeping": false}'
        elif self.path == "/metrics":
            body = b"vllm:num_requests_running 0\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_sleeping_engine_whose_health_answers_is_not_ready():
    from gpupool.replicas.probe_pool import ProbePool, Target

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sleepy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"127.0.0.1:{server.server_address[1]}"
    pool = ProbePool(1.0, 4)
    try:
        asleep = pool.round({1: Target("t", endpoint, "/health", sleepy=True)}, 3.0)[1]
        assert not asleep.ready and asleep.error == "asleep (is_sleeping)"
        plain = pool.round({2: Target("t", endpoint, "/health")}, 3.0)[2]
        assert plain.ready  # a service that parks nothing is taken at its health's word
        Sleepy.asleep = False
        assert pool.round({3: Target("t", endpoint, "/health", sleepy=True)}, 3.0)[3].ready
    finally:
        Sleepy.asleep = True
        pool.close()
        server.shutdown()
