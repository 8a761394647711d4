"""The agent's interactive sessions (docs/interactive.md): for each allocation of an
interactive job (a shell session — ``gpupool alloc``, ``srun --pty``) that runs here, one
``SessionLink`` to the server, kept while the allocation runs and ended, its terminals told
why, when it stops. ``follow`` is all the agent's loop calls: it only compares sets and
starts or ends links, whose threads do the rest."""

import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from gpupool.agent.session_link import SessionLink
from gpupool.agent.state import Record
from gpupool.agent.terminals import Where
from gpupool.model import notebook
from gpupool.model.protocol import OrderOut


def tunnel_url(server: str, node: str, alloc_id: int) -> str:
    base = server.rstrip("/")
    return "ws" + base.removeprefix("http") + f"/api/v1/nodes/{node}/tunnels/{alloc_id}"


def idle_warning(release_at: float, now: float) -> str:
    at = time.strftime("%H:%M:%S UTC", time.gmtime(release_at))
    minutes = max(0, round((release_at - now) / 60))
    left = f"in {minutes} min" if minutes >= 2 else f"in {max(0, round(release_at - now))} s"
    return (
        f"idle: no input and no GPU activity in this session for a while; it will be released "
        f"{left} (at {at}) and its cards given back, unless you type here or its cards work "
        "(files are kept where the job was started from; its work folder $GPUPOOL_WORK_DIR, "
        "/tmp and what runs here go)"
    )


class SessionKeeper:
    def __init__(
        self,
        node: str,
        server: Callable[[], str],
        token: str,
        folder: Callable[[int], Path],
        tls: ssl.SSLContext | None = None,
    ):
        """``folder``: an allocation's state folder."""
        self.node, self._server, self._token, self._tls = node, server, token, tls
        self._folder = folder
        self.links: dict[int, SessionLink] = {}
        self.warned: dict[int, float] = {}  # allocation -> the idle release its terminals heard

    def follow(self, records: Mapping[int, Record], desired: Mapping[int, OrderOut]) -> None:
        """A link for each interactive allocation running here; the others' links end (a
        link whose threads stopped on a fault is made again)."""
        for alloc_id, link in list(self.links.items()):
            if link.done and not link.ending:
                del self.links[alloc_id]
        for alloc_id, order in desired.items():
            rec = records.get(alloc_id)
            if (
                order.interactive
                and rec is not None
                and not rec.released
                and rec.stop_sent_at is None
                and alloc_id not in self.links
            ):
                self._start(rec, order)
        for alloc_id, link in list(self.links.items()):
            rec = records.get(alloc_id)
            gone = alloc_id not in desired or rec is None or rec.released
            if gone or (rec is not None and rec.stop_sent_at is not None):
                why = (rec.stop_reason if rec is not None else "") or "released by the server"
                link.end(f"this session's job is being stopped ({why})")
                del self.links[alloc_id]
        self._warn(desired)

    def _warn(self, desired: Mapping[int, OrderOut]) -> None:
        """Tell a session's terminals of an idle warning the server gave it (once each), and
        that it was withdrawn."""
        for alloc_id, link in self.links.items():
            order = desired.get(alloc_id)
            at = order.idle_release_at if order is not None else None
            told = self.warned.get(alloc_id)
            if at is not None and at != told:
                link.tell(idle_warning(at, time.time()))
                self.warned[alloc_id] = at
            elif at is None and told is not None:
                link.tell("idle warning withdrawn: this session was used again")
                del self.warned[alloc_id]
        for alloc_id in set(self.warned) - set(self.links):
            del self.warned[alloc_id]

    def end(self, alloc_id: int, why: str) -> None:
        """The session's job is being stopped here (its time limit, a memory or disk limit):
        its terminals are told before the stop reaches them, not a round later, when the
        job's processes (and the terminals with them) may be gone already."""
        link = self.links.pop(alloc_id, None)
        if alloc_id in self.warned:  # the likely why (a cancel after the warning reads alike)
            why = f"{why}; it had been warned as idle"
            del self.warned[alloc_id]
        if link is not None:
            link.end(f"this session's job is being stopped ({why})")

    def stop_all(self) -> None:
        for link in self.links.values():
            link.end("the node's agent is stopping")
        self.links.clear()

    def _start(self, rec: Record, order: OrderOut) -> None:
        folder = self._folder(rec.alloc_id)
        link = SessionLink(
            rec.alloc_id,
            lambda: tunnel_url(self._server(), self.node, rec.alloc_id),
            self._token,
            lambda: Where.of(folder, rec.pid),
            folder,
            self._tls,
            notebook.port_of(rec.job_id) if rec.interactive == notebook.KIND else None,
        )
        self.links[rec.alloc_id] = link
        link.start()
