"""A gate for a model server that serves everything on one port (vLLM's OpenAI server with
VLLM_SERVER_DEV_MODE=1 serves /sleep, /wake_up, /is_sleeping, /collective_rpc, /metrics ...
beside /v1). Run the server on $GPUPOOL_CONTROL_PORT, which only the node's agent reaches,
and this gate on $PORT, the port the node publishes: it passes on what the service's clients
may ask (GATE_ALLOW, comma-separated path prefixes; vLLM's OpenAI routes by default) and
answers 404 to everything else, so no client — another tenant's job included — reaches the
server's development endpoints. Stdlib only, any Python 3; answers stream through as they
come (server-sent events, chunked).

    gpupool service create chat --tenant inference --request gpu=1,mem=40GiB --warm 2 -- \\
      bash -c 'python3 -c "$1" & VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --enable-sleep-mode \\
        --host 0.0.0.0 --port $GPUPOOL_CONTROL_PORT & wait -n; exit 1' gate \\
      "$(cat examples/replica_gate.py)"
"""

import http.client
import http.server
import os

ALLOW = tuple(
    p.strip()
    for p in os.environ.get(
        "GATE_ALLOW", "/v1/,/health,/ping,/version,/tokenize,/detokenize,/invocations"
    ).split(",")
    if p.strip()
)
UPSTREAM = int(os.environ.get("GATE_UPSTREAM_PORT") or os.environ["GPUPOOL_CONTROL_PORT"])
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
       "upgrade", "host", "content-length"}  # fmt: skip


def allowed(path: str) -> bool:
    path = path.split("?", 1)[0]
    if "/../" in path or path.endswith("/..") or "%2e" in path.lower():
        return False
    return any(path == p.rstrip("/") or path.startswith(p) for p in ALLOW)


class Gate(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _relay(self):
        body = self._body()
        if not allowed(self.path):
            data = b"no such page\n"
            self.send_response(404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=600)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
        except OSError:
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in HOP:
                self.send_header(key, value)
        length = answer.getheader("Content-Length")
        if length is not None:
            self.send_header("Content-Length", length)
            self.end_headers()
            while chunk := answer.read(65536):
                self.wfile.write(chunk)
        else:  # a stream: passed on as each part comes
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := answer.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        upstream.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _relay


host = os.environ.get("HOST", "0.0.0.0")
http.server.ThreadingHTTPServer((host, int(os.environ["PORT"])), Gate).serve_forever()
