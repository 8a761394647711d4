"""HTTPS certificates reloaded on change, without a restart: a renewed certificate (``gpupool
cert create`` again, certbot, a secret rotated by a deployment tool) is served to new
connections within ``CHECK_S``; connections already open keep the one they began with.

uvicorn builds the server's TLS context through ``ssl_context_factory``. This factory builds
it as uvicorn would and gives it a server-name callback (OpenSSL calls it on every
ClientHello, with or without SNI) that hands each new connection the newest context. When the
files change, a whole new context is built from them in the watcher's thread — the live ones
are never changed under a handshake — and only a pair that loads replaces the current one: the
key written before its certificate, a typo, a half-written file are logged, the old context is
kept and the pair tried again at the next check, so a rotation caught half-way completes.
(Loading into the live context instead once left it with the new certificate and the old key
when the pair did not match, and handshakes failed until the next check.)"""

import logging
import os
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("gpupool.tls")
CHECK_S = 2.0


def stamp(*paths: str) -> tuple[tuple[int, int, int], ...]:
    """What changes when a file is rewritten or replaced: inode, size, modification time."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((0, 0, 0))
    return tuple(out)


class Current:
    """The context new connections get (replaced whole, never changed)."""

    def __init__(self, context: ssl.SSLContext):
        self.context = context

    def pick(self, conn: ssl.SSLObject, server_name: str | None, base: ssl.SSLContext) -> None:
        if self.context is not base:
            conn.context = self.context


@dataclass
class ReloadingContext:
    """uvicorn's ``ssl_context_factory``: picklable, so worker processes each make their own."""

    certfile: str
    keyfile: str
    check_s: float = CHECK_S
    client_ca: str | None = None  # mutual TLS: ask clients for a certificate of this CA

    def __call__(self, config: Any, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        def build() -> ssl.SSLContext:
            context = default()  # uvicorn's: the files as they are now
            if self.client_ca is not None:
                # asked, not required: people and joining servers present none (client_certs)
                context.load_verify_locations(cafile=self.client_ca)
                context.verify_mode = ssl.CERT_OPTIONAL
            return context

        base = build()
        current = Current(base)
        base.sni_callback = current.pick
        seen = stamp(self.certfile, self.keyfile)
        threading.Thread(
            target=self.watch, args=(current, build, seen), daemon=True, name="tls-reload"
        ).start()
        return base

    def watch(
        self,
        current: Current,
        build: Callable[[], ssl.SSLContext],
        seen: tuple[tuple[int, int, int], ...],
        stop: threading.Event | None = None,
    ) -> None:
        """Until ``stop`` (never, in a server: a daemon thread), a new context on change."""
        stop = stop or threading.Event()
        while not stop.wait(self.check_s):
            now = stamp(self.certfile, self.keyfile)
            if now == seen:
                continue
            try:
                fresh = build()
            except (OSError, ssl.SSLError) as exc:
                log.warning(
                    "TLS: %s and %s changed but do not load (%s); serving the previous "
                    "certificate, trying again",
                    self.certfile, self.keyfile, exc,
                )  # fmt: skip
                continue
            current.context, seen = fresh, now
            log.info("TLS: reloaded the certificate from %s", self.certfile)
