"""gpupool up's embedded agents wait for the server once, together: before, each agent polled
/healthz ten times a second and 200 of them kept the server from starting for 250 s. Here a
stand-in server on loopback comes up late and counts what reaches it."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpupool.agent.embedded import EmbeddedAgents
from gpupool.agent.workloads import IsolationConfig
from tests.support.agents import wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_embedded_agents_wait_for_the_server_once_then_all_register(tmp_path):
    port = _free_port()
    seen = {"healthz": 0, "nodes": set()}
    lock = threading.Lock()

    class Server(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, code: int) -> None:
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def do_GET(self):
            with lock:
                seen["healthz"] += self.path == "/healthz"
            self._answer(200 if self.path == "/healthz" else 503)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen["nodes"].add(body.get("name"))
            self._answer(503)  # not now: the agents retry, and are stopped by the test

    names = {f"n{i}": "simulated:1xA100-80G" for i in range(40)}
    agents = EmbeddedAgents(f"http://127.0.0.1:{port}", "token", tmp_path, names,
                            IsolationConfig(mode="none"))  # fmt: skip
    agents.start()
    time.sleep(1.0)  # the server is not listening yet
    server = ThreadingHTTPServer(("127.0.0.1", port), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wait_for("every agent's registration", lambda: len(seen["nodes"]) == 40, 20)
    finally:
        agents.stop()
        server.shutdown()
        server.server_close()
    assert seen["healthz"] == 1  # one waiter for all forty
