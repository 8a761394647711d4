"""A notebook's stand-in for the tests (standard library only: it runs as a tenant's user,
with the node's own python): an HTTP app on ``$GPUPOOL_NOTEBOOK_PORT`` (loopback) under
``$GPUPOOL_NOTEBOOK_BASE_URL`` that says where it runs (its user, network namespace, job),
echoes what reached it (headers, body size), sets cookies a hostile app would, and echoes
WebSocket messages; ``page`` is a browser page that uses both."""

import base64
import hashlib
import json
import os
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BASE = os.environ["GPUPOOL_NOTEBOOK_BASE_URL"]
PORT = int(os.environ["GPUPOOL_NOTEBOOK_PORT"])
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PAGE = """<!doctype html><html><head><title>notebook stand-in</title></head><body>
<p id="where">loading</p><p id="echo">no echo</p><script>
fetch("where").then(r => r.json()).then(w => {
  document.getElementById("where").textContent = "uid " + w.uid + " job " + w.job;
});
const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/page$/, "echo"));
ws.onopen = () => ws.send("hello from the browser");
ws.onmessage = (m) => { document.getElementById("echo").textContent = m.data; };
</script></body></html>"""

# a hostile notebook's page: what its scripts can reach of the server's origin, where the
# person looking may be logged in to the dashboard (its session cookie, its CSRF token)
EVIL = """<!doctype html><html><head><title>hostile notebook</title></head><body>
<pre id="results">running</pre><script>
const out = {};
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
async function attempt(name, f) {
  try { out[name] = await f(); } catch (e) { out[name] = "blocked"; }
}
(async () => {
  await attempt("own", async () => (await fetch("where")).ok ? "ok" : "failed");
  await attempt("api", async () => {
    const r = await fetch("/api/v1/jobs"); return r.ok ? "leaked" : "status " + r.status;
  });
  await attempt("redirect", async () => {
    const r = await fetch("redir"); return r.ok ? "leaked" : "status " + r.status;
  });
  await attempt("redirect_port", async () => {
    const r = await fetch("redir-port"); return r.ok ? "leaked" : "status " + r.status;
  });
  await attempt("popup", async () => {
    const w = window.open("/jobs"); if (!w) return "blocked";
    await wait(1500);
    return w.document.documentElement.innerHTML.includes("csrf") ? "leaked" : "opened";
  });
  await attempt("frame", async () => {
    const f = document.createElement("iframe"); f.src = "/jobs"; document.body.append(f);
    await wait(1500);
    const d = f.contentDocument;
    return d && d.documentElement.innerHTML.includes("csrf") ? "leaked" : "blocked";
  });
  document.getElementById("results").textContent = JSON.stringify(out);
})();
</script></body></html>"""


class App(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str, extra: list[tuple[str, str]] = ()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: object, extra: list[tuple[str, str]] = ()) -> None:
        self._send(200, json.dumps(value).encode(), "application/json", extra)

    def _where(self) -> dict[str, object]:
        return {
            "uid": os.getuid(), "netns": os.readlink("/proc/self/ns/net"),
            "job": os.environ.get("GPUPOOL_JOB_ID"), "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
        }  # fmt: skip

    def do_GET(self) -> None:
        if not self.path.startswith(BASE):
            self._send(404, b"outside the base path", "text/plain")
            return
        rest = self.path[len(BASE) :]
        if rest in ("", "where"):
            self._json(self._where())
        elif rest == "page":
            self._send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif rest == "cookies":
            self._json({"set": True}, [
                ("Set-Cookie", "app=1; Path=/"),
                ("Set-Cookie", "wide=1; Path=/api/; Domain=127.0.0.1; HttpOnly"),
                ("Set-Cookie", "gpupool_session=forged; Path=/"),
                ("Set-Cookie", "gpupool_notebook=forged"),
                ("Set-Cookie", "__Host-x=1; Path=/; Secure"),
                ("Set-Cookie", f"deep=1; Path={BASE}sub/"),
                ("Service-Worker-Allowed", "/"),
                ("Strict-Transport-Security", "max-age=31536000"),
                ("Clear-Site-Data", '"cookies"'),
            ])  # fmt: skip
        elif rest == "evil":
            self._send(200, EVIL.encode(), "text/html; charset=utf-8")
        elif rest == "redir":
            self._send(302, b"", "text/plain", [("Location", "/api/v1/jobs")])
        elif rest == "redir-port":  # the server itself, its port written with a leading zero
            host, _, port = self.headers.get("Host", "").rpartition(":")
            where = f"http://{host}:0{port}/api/v1/jobs"
            self._send(307, b"", "text/plain", [("Location", where)])
        elif rest == "slow":
            time.sleep(3)
            self._json({"slow": True})
        elif rest.startswith("big"):
            n = int(rest.partition("=")[2] or 0)
            self._send(200, b"x" * n, "application/octet-stream")
        elif rest == "echo" and self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket()
        else:
            self._send(404, json.dumps({"no": self.path}).encode(), "application/json")

    do_HEAD = do_GET

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        got = self.rfile.read(size)
        self._json({"size": len(got), **self._where()})

    do_PUT = do_POST

    def _websocket(self) -> None:
        key = self.headers["Sec-WebSocket-Key"].encode()
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 8:  # close: answered, then the end
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                return
            if opcode in (1, 2):
                reply = f"echo {data.decode(errors='replace')} uid {os.getuid()}".encode()
                size = (bytes([len(reply)]) if len(reply) < 126
                        else b"\x7e" + struct.pack(">H", len(reply)))  # fmt: skip
                self.wfile.write(bytes([0x81]) + size + reply)
                self.wfile.flush()


if __name__ == "__main__":
    print(f"serving on 127.0.0.1:{PORT} under {BASE}", file=sys.stderr, flush=True)
    ThreadingHTTPServer(("127.0.0.1", PORT), App).serve_forever()
