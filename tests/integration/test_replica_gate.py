"""examples/replica_gate.py, the gate the vLLM recipe puts on a replica's published port
(issue 57): a model server that serves its development endpoints beside its API on one port
runs on the control port, and the gate passes on only what clients may ask — streams
included — and answers 404 to the rest."""

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.agents import wait_for
from tests.support.replica import REPLICA

GATE = (Path(__file__).resolve().parents[2] / "examples" / "replica_gate.py").read_text()


def _start(code: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


@pytest.fixture
def gated():
    """examples/replica.py on one port (as vLLM: everything there), the gate before it."""
    engine, gate = free_port(), free_port()
    procs = [
        _start(REPLICA, {"PORT": str(engine), "HOST": "127.0.0.1", "READY_AFTER": "0"}),
        _start(GATE, {"PORT": str(gate), "GATE_UPSTREAM_PORT": str(engine),
                      "GATE_ALLOW": "/infer,/health", "HOST": "127.0.0.1"}),
    ]  # fmt: skip
    try:
        wait_for("the gate", lambda: _answers(f"http://127.0.0.1:{gate}/health"), 20)
        yield f"http://127.0.0.1:{gate}", f"http://127.0.0.1:{engine}"
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_gate_passes_the_api_and_nothing_of_the_platforms(gated):
    gate, engine = gated
    served = httpx.post(f"{gate}/infer", json={"tokens": 1}, timeout=5, trust_env=False)
    assert served.status_code == 200 and "port" in served.json()
    for method, path in (("POST", "/sleep?level=1"), ("POST", "/wake_up"), ("POST", "/crash"),
                         ("GET", "/metrics"), ("GET", "/is_sleeping"),
                         ("POST", "/infer/../sleep"), ("GET", "http://x/metrics")):  # fmt: skip
        # sent as written (a client library would tidy the path first)
        status = _raw(gate, f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert status == 404, (path, status)
    asleep = httpx.get(f"{engine}/is_sleeping", timeout=5, trust_env=False).json()
    assert asleep == {"is_sleeping": False}  # nothing reached it
    assert httpx.post(f"{gate}/infer", json={"tokens": 1}, timeout=5).status_code == 200


def _raw(base: str, request: str) -> int:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(request.encode())
        head = s.recv(4096).decode()
    return int(head.split()[1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Stream(http.server.BaseHTTPRequestHandler):
    """Server-sent events, a part every 0.3 s (as a completion streams its tokens)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(5):
            part = f"data: token {i}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
            time.sleep(0.3)
        self.wfile.write(b"0\r\n\r\n")


def test_a_stream_passes_as_it_comes():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    gate = _start(GATE, {"PORT": str(port), "GATE_UPSTREAM_PORT": str(server.server_port),
                         "HOST": "127.0.0.1"})  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/v1/completions"
        wait_for("the gate", lambda: _answers_any(url), 20)
        start = time.monotonic()
        parts: list[tuple[float, str]] = []
        with httpx.stream("POST", url, json={"stream": True}, timeout=10, trust_env=False) as r:
            for line in r.iter_lines():
                if line:
                    parts.append((time.monotonic() - start, line))
    finally:
        gate.kill()
        gate.wait()
        server.shutdown()
    assert [p for _, p in parts] == [f"data: token {i}" for i in range(5)]
    assert parts[0][0] < 0.5 < parts[-1][0]  # the first part came before the last was sent


def _answers_any(url: str) -> bool:
    try:
        httpx.get(url, timeout=2, trust_env=False)
    except httpx.HTTPError:
        return False
    return True
