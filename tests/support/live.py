"""A gpupool server on a real loopback socket, in a thread of the test process."""

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import uvicorn
from fastapi import FastAPI

from gpupool.client.tls import system_trust
from gpupool.server.app import create_app
from gpupool.server.auth import create_user_token
from gpupool.server.db.engine import Database
from gpupool.server.deps import ServerContext
from gpupool.server.settings import Settings


@dataclass
class LiveServer:
    url: str
    ctx: ServerContext
    admin_token: str

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, verify=system_trust())

    def admin(self) -> httpx.Client:
        return self.client(self.admin_token)

    def cycle(self, now: float | None = None) -> None:
        """Run one scheduling cycle now (tests start the server without its loop thread)."""
        assert self.ctx.loop.leadership.try_acquire()
        self.ctx.loop.run_once(now)

    def token(
        self,
        name: str,
        role: str,
        tenant: str | None = None,
        node: str | None = None,
        expires_at: float | None = None,
    ) -> str:
        with self.ctx.db.write() as s:
            return create_user_token(s, name, role, tenant, node, expires_at)


@contextmanager
def live_server(
    settings: Settings,
    *,
    run_scheduler: bool = False,
    prepare: Callable[[FastAPI], None] | None = None,
) -> Iterator[LiveServer]:
    """``prepare``: changes the app before it serves (an older server's missing route)."""
    db = Database(settings.db_url)
    db.migrate()
    with db.write() as s:
        admin_token = create_user_token(s, "root", "admin")
    db.dispose()
    app = create_app(settings, run_scheduler=run_scheduler)
    if prepare is not None:
        prepare(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", proxy_headers=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    if not run_scheduler:  # the test drives the duties: it is the leader they write as
        assert app.state.ctx.loop.leadership.try_acquire()
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", app.state.ctx, admin_token)
    finally:
        app.state.ctx.changes.stop()  # answer agents' long polls: nothing waits for them
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
