"""The node identities of ``gpupool bench agents``, played by one asyncio loop per generator
process (several processes at 1,000 nodes and more: one Python loop could not send the
requests that many agents send). Each speaks the exact agent protocol: register, heartbeat
with telemetry, ask for orders (every second, or by long poll) and report each order running;
or, with ``channel``, open the agent's WebSocket, beat on it (telemetry on a beat every
``TELEMETRY_S``) and take the orders it pushes. A node told to fall silent stops all of it,
as a crashed agent would."""

import asyncio
import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from gpupool.model import SpecError

DEVICES = [{"index": i, "model": "A100-80G", "memory_mib": 81920} for i in range(4)]
NODE_BODY = {"cpu_millis": 64000, "memory_mib": 524288, "devices": DEVICES}
PROTOCOLS = ("poll", "long-poll", "channel")
TELEMETRY_S = 60.0  # as an idle agent on its channel (agent.telemetry_pace)


class Generator:
    """aiohttp, not httpx, plays the agents: on this machine an httpx.AsyncClient spent 3.25 ms
    of CPU per request against a trivial server, aiohttp 0.1 ms — with httpx the generator,
    not the server, was what a 1,000-node run measured."""

    def __init__(self, url: str, token: str, names: list[str], protocol: str, heartbeat_s: float):
        self.base = url + "/api/v1"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.limit = 2 * len(names) + 16
        self.http: aiohttp.ClientSession | None = None  # made on the generator's event loop
        self.names = names
        self.protocol = protocol
        self.heartbeat_s = heartbeat_s
        self.requests = 0
        self.errors = 0
        self.silent: set[str] = set()  # nodes whose agent "crashed"
        self.stop = asyncio.Event()

    async def open(self) -> None:
        self.http = aiohttp.ClientSession(
            headers=self.headers,
            timeout=aiohttp.ClientTimeout(total=60),
            connector=aiohttp.TCPConnector(limit=self.limit),
        )

    async def call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        """(status, the JSON answer) or (0, None) if the request failed."""
        assert self.http is not None
        self.requests += 1
        try:
            async with self.http.request(method, self.base + path, **kw) as r:
                return r.status, await r.json() if r.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            self.errors += 1
            return 0, None

    async def register(self, then: Callable[[str], None]) -> None:
        """Register every node; ``then(name)`` as soon as that one is (an agent beats from its
        registration on: at 5,000 nodes registering them all took about the node-lost timeout,
        and nodes waiting for the last were declared lost)."""
        sem = asyncio.Semaphore(16)

        async def one(name: str) -> None:
            async with sem:
                body = {"name": name, **NODE_BODY}
                status, _ = await self.call("POST", "/nodes", json=body)
                if not 200 <= status < 300:
                    raise SpecError(f"bench: registering {name} failed")
            then(name)

        await asyncio.gather(*(one(n) for n in self.names))

    async def heartbeat(self, name: str) -> None:
        if self.protocol == "channel":
            return  # its beats go on the channel
        await asyncio.sleep(random.uniform(0, self.heartbeat_s))
        while not self.stop.is_set() and name not in self.silent:
            telemetry = [{"index": d["index"], "util_pct": 0.0, "temp_c": 35.0, "power_w": 60.0}
                         for d in DEVICES]  # fmt: skip
            await self.call("POST", f"/nodes/{name}/heartbeat", json={"devices": telemetry})
            await self.sleep(self.heartbeat_s)

    async def orders(self, name: str) -> None:
        await asyncio.sleep(random.uniform(0, 1.0))
        known: str | None = None
        seen: set[int] = set()
        if self.protocol == "channel":
            await self.channel(name, seen)
            return
        while not self.stop.is_set() and name not in self.silent:
            params = (
                {"wait": 25, "known": known} if self.protocol == "long-poll" and known else None
            )
            status, answer = await self.call("GET", f"/nodes/{name}/orders", params=params)
            if status != 200 or name in self.silent:
                await self.sleep(1.0)
                continue
            reported = await self.report(answer, seen)
            known = answer.get("etag") if reported else None  # else the same orders again
            if self.protocol == "poll" or known is None:
                await self.sleep(1.0)

    async def report(self, answer: dict[str, Any], seen: set[int]) -> bool:
        """Report each new order running; False if a report failed (it is tried again)."""
        done = True
        for order in answer["orders"]:
            if order["id"] not in seen:
                body = {"generation": order["generation"], "state": "running"}
                status, _ = await self.call("POST", f"/allocations/{order['id']}/status", json=body)
                if status in (200, 404, 409):  # reported, or no longer to report
                    seen.add(order["id"])
                else:
                    done = False
        return done

    async def channel(self, name: str, seen: set[int]) -> None:
        """The agent's channel: a beat every ``heartbeat_s`` (telemetry on one a minute), the
        orders it pushes reported. Reconnects after a second if it drops."""
        assert self.http is not None
        url = self.base.replace("http", "ws", 1) + f"/nodes/{name}/channel"
        while not self.stop.is_set() and name not in self.silent:
            self.requests += 1
            try:
                async with self.http.ws_connect(url, heartbeat=None, max_msg_size=0) as ws:
                    await self._on_channel(ws, name, seen)
            except (aiohttp.ClientError, TimeoutError, ValueError):
                self.errors += 1
            await self.sleep(1.0)

    async def _on_channel(self, ws: Any, name: str, seen: set[int]) -> None:
        seq, telemetry_at = 0, 0.0
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + random.uniform(0, self.heartbeat_s)
        while not self.stop.is_set() and name not in self.silent:
            now = loop.time()
            if now >= next_beat:
                seq += 1
                frame: dict[str, Any] = {"beat": seq}
                if now >= telemetry_at:
                    frame["devices"] = [{"index": d["index"], "util_pct": 0.0, "temp_c": 35.0,
                                         "power_w": 60.0} for d in DEVICES]  # fmt: skip
                    # the first at once, as an agent's; then at a phase of its own, so a
                    # window shorter than TELEMETRY_S sees the steady state's share
                    later = TELEMETRY_S if seq > 1 else random.uniform(0, TELEMETRY_S)
                    telemetry_at = now + later
                await ws.send_json(frame)
                self.requests += 1
                next_beat = now + self.heartbeat_s
            try:
                msg = await ws.receive(timeout=max(0.05, min(next_beat - now, 1.0)))
            except TimeoutError:
                continue
            if msg.type != aiohttp.WSMsgType.TEXT:
                return  # closed
            frame = msg.json()
            if "refused" in frame:
                self.errors += 1
            elif "orders" in frame and not await self.report(frame["orders"], seen):
                await ws.close()  # as an agent: reconnect, and the orders come again
                return

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()

    async def sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)


@dataclass
class Part:
    """One generator process's share of the work and its handles to the parent."""

    url: str
    token: str
    names: list[str]
    silent: list[str]  # fall silent when the parent says so
    protocol: str
    heartbeat_s: float


def play(part: Part, ready: Any, silence: Any, stop: Any, requests: Any, errors: Any) -> None:
    """A generator process: ``ready`` (a queue) gets one item once its nodes registered;
    ``silence`` and ``stop`` are events set by the parent; ``requests`` / ``errors`` are
    shared counters it keeps up to date."""
    asyncio.run(_play(part, ready, silence, stop, requests, errors))


async def _play(part: Part, ready: Any, silence: Any, stop: Any, requests: Any, errors: Any):
    gen = Generator(part.url, part.token, part.names, part.protocol, part.heartbeat_s)
    await gen.open()
    tasks: list[asyncio.Task] = []

    def start(name: str) -> None:
        tasks.append(asyncio.create_task(gen.heartbeat(name)))
        tasks.append(asyncio.create_task(gen.orders(name)))

    try:
        await gen.register(start)
    except SpecError as exc:
        ready.put(str(exc))
        gen.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await gen.close()
        return
    ready.put("")
    while not stop.is_set():
        if silence.is_set():
            gen.silent.update(part.silent)
        requests.value, errors.value = gen.requests, gen.errors
        await asyncio.sleep(0.2)
    gen.stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await gen.close()
