"""HTTPS certificates reloaded on change, without a restart: a renewed certificate (``gpupool
cert create`` again, certbot, a secret rotated by a deployment tool) is served to new
connections within ``CHECK_S``; connections already open keep the one they began with.

uvicorn builds the server's TLS context through ``ssl_context_factory``; this factory builds
it as uvicorn would, then watches the two files and loads them into the same context when they
change (OpenSSL gives each new connection the context's certificate of the moment). A pair that
does not load — the key written before the certificate, a typo — is logged and the old pair
kept; it is tried again at the next check, so a rotation caught half-way completes."""

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


@dataclass
class ReloadingContext:
    """uvicorn's ``ssl_context_factory``: picklable, so worker processes each make their own."""

    certfile: str
    keyfile: str
    check_s: float = CHECK_S
    client_ca: str | None = None  # mutual TLS: ask clients for a certificate of this CA

    def __call__(self, config: Any, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        context = default()
        if self.client_ca is not None:
            # asked, not required: people and joining servers present none (client_certs)
            context.load_verify_locations(cafile=self.client_ca)
            context.verify_mode = ssl.CERT_OPTIONAL
        seen = stamp(self.certfile, self.keyfile)
        threading.Thread(
            target=self.watch, args=(context, seen), daemon=True, name="tls-reload"
        ).start()
        return context

    def watch(
        self,
        context: ssl.SSLContext,
        seen: tuple[tuple[int, int, int], ...],
        stop: threading.Event | None = None,
    ) -> None:
        """Until ``stop`` (never, in a server: a daemon thread), reload on change."""
        stop = stop or threading.Event()
        while not stop.wait(self.check_s):
            now = stamp(self.certfile, self.keyfile)
            if now != seen and self.reload(context):
                seen = now

    def reload(self, context: ssl.SSLContext) -> bool:
        try:
            context.load_cert_chain(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            log.warning(
                "TLS: %s and %s changed but do not load (%s); serving the previous "
                "certificate, trying again",
                self.certfile, self.keyfile, exc,
            )  # fmt: skip
            return False
        log.info("TLS: reloaded the certificate from %s", self.certfile)
        return True
