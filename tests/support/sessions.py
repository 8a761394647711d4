"""Interactive sessions for the tests: a terminal of a session as a person's client holds it
(the server's WebSocket), read until a pattern shows."""

import contextlib
import json
import re
import time

import httpx
from websockets.exceptions import ConnectionClosed

from gpupool.client import ApiClient
from gpupool.client.terminal import open_terminal
from tests.support.agents import agent_thread, in_state, make_agent, wait_for, wait_for_cards
from tests.support.cluster import ok
from tests.support.live import live_server


class Term:
    def __init__(self, url: str, token: str, job_id: int, **opened: object):
        self.api = ApiClient(url, token)
        self.ws, self.opened = open_terminal(self.api, job_id, **opened)  # type: ignore[arg-type]
        self.out = b""
        self.err = b""
        self.frames: list[dict] = []
        self.code: int | None = None

    @property
    def number(self) -> int:
        return int(self.opened["terminal"])

    def type(self, text: str) -> None:
        self.ws.send(b"\x00" + text.encode())

    def control(self, **frame: object) -> None:
        self.ws.send(json.dumps(frame))

    def read_until(self, pattern: str, timeout: float = 20) -> str:
        """Everything printed so far once ``pattern`` (a regex) shows in it."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text):
            left = deadline - time.monotonic()
            if left <= 0 or self.code is not None:
                raise AssertionError(f"no {pattern!r} in {self.text[-2000:]!r}")
            try:
                message = self.ws.recv(timeout=min(left, 1.0))
            except TimeoutError:
                continue
            except ConnectionClosed:
                raise AssertionError(f"closed before {pattern!r}: {self.text[-2000:]!r}") from None
            self._take(message)
        return self.text

    def wait_exit(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while self.code is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"no exit; printed {self.text[-2000:]!r}")
            try:
                self._take(self.ws.recv(timeout=1.0))
            except TimeoutError:
                continue
        return self.code

    def _take(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            if message[:1] == b"\x01":
                self.err += message[1:]
            else:
                self.out += message[1:]
            return
        frame = json.loads(message)
        self.frames.append(frame)
        if frame.get("t") == "exit":
            self.code = int(frame["code"])

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace")

    def close(self) -> None:
        self.ws.close()


def running_session(
    admin: httpx.Client, tenant: str, request: str = "gpu=1", timeout: float = 30, **extra
) -> dict:
    """An allocation (a shell session) of ``tenant``, running."""
    body = {"request": request, "tenant": tenant, "allocation": True, "max_runtime_s": 900,
            **extra}  # fmt: skip
    job = ok(admin.post("/api/v1/jobs", json=body), 201)
    assert job["interactive"] == "shell"
    done = wait_for("the session", in_state(admin, job["id"], "running"), timeout)
    assert isinstance(done, dict)
    return done


def shell(url: str, token: str, job_id: int, **opened: object) -> Term:
    """A new terminal: bash without startup files, a plain prompt to read for."""
    opened.setdefault("command", ["bash", "--norc", "--noprofile", "-i"])
    term = Term(url, token, job_id, **opened)
    term.type("PS1='$ '; export PS1\n")
    term.read_until(r"\$ $")
    return term


@contextlib.contextmanager
def session_pool(settings, agent_dir, tenants=("alpha",)):
    """A server with its scheduler and ``tenants``, and node n1 (two simulated A100s) whose
    agent runs workloads as the test's user: (server, agent)."""
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        for name in tenants:
            ok(admin.post("/api/v1/tenants", json={"name": name}), 201)
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1", agent_dir)
        with agent_thread(agent):
            wait_for_cards(admin)
            yield srv, agent
