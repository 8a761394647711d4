"""``gpupool bench agents``: what N agents cost a real server process, speaking the exact agent
protocol from one asyncio load generator with N node identities (no workloads run).

For each way of asking for orders — ``poll`` (every second, as agents before long polls did)
and ``long-poll`` (``wait`` + ``known``) — on a fresh server: register N nodes (4 A100 each),
heartbeat each every ``heartbeat_s`` with telemetry, keep asking for orders; after a warm-up,
measure the server's CPU over ``seconds`` of idling (from /proc), then submit a burst of jobs
and time submit → the order reaching its node's agent (which then reports it running).
"""

import asyncio
import contextlib
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from gpupool.bench.procfs import cpu_seconds
from gpupool.client import ClientError
from gpupool.model import SpecError
from gpupool.server.auth import create_user_token
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import TenantRow
from gpupool.server.process import free_port, start_server

DEVICES = [{"index": i, "model": "A100-80G", "memory_mib": 81920} for i in range(4)]
PROTOCOLS = ("poll", "long-poll")


class Generator:
    def __init__(self, url: str, token: str, nodes: int, protocol: str, heartbeat_s: float):
        self.http = httpx.AsyncClient(
            base_url=url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
            limits=httpx.Limits(
                max_connections=2 * nodes + 16,
                max_keepalive_connections=2 * nodes + 16,
                keepalive_expiry=4.0,
            ),
        )
        self.names = [f"agent-{i:05d}" for i in range(nodes)]
        self.protocol = protocol
        self.heartbeat_s = heartbeat_s
        self.requests = 0
        self.errors = 0
        self.delivered: dict[int, float] = {}  # job id -> when its order reached its node
        self.stop = asyncio.Event()

    async def call(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        self.requests += 1
        try:
            return await self.http.request(method, path, **kw)
        except httpx.HTTPError:
            self.errors += 1
            return None

    async def register(self) -> None:
        sem = asyncio.Semaphore(32)

        async def one(name: str) -> None:
            async with sem:
                body = {"name": name, "cpu_millis": 64000, "memory_mib": 524288, "devices": DEVICES}
                r = await self.call("POST", "/nodes", json=body)
                if r is None or r.status_code >= 300:
                    raise SpecError(f"bench: registering {name} failed")

        await asyncio.gather(*(one(n) for n in self.names))

    async def heartbeat(self, name: str) -> None:
        await asyncio.sleep(random.uniform(0, self.heartbeat_s))
        while not self.stop.is_set():
            telemetry = [{"index": d["index"], "util_pct": 0.0, "temp_c": 35.0, "power_w": 60.0}
                         for d in DEVICES]  # fmt: skip
            await self.call("POST", f"/nodes/{name}/heartbeat", json={"devices": telemetry})
            await self._sleep(self.heartbeat_s)

    async def orders(self, name: str) -> None:
        await asyncio.sleep(random.uniform(0, 1.0))
        known: str | None = None
        seen: set[int] = set()
        while not self.stop.is_set():
            params = (
                {"wait": 25, "known": known} if self.protocol == "long-poll" and known else None
            )
            r = await self.call("GET", f"/nodes/{name}/orders", params=params)
            if r is None or r.status_code != 200:
                await self._sleep(1.0)
                continue
            answer = r.json()
            known = answer.get("etag")
            for order in answer["orders"]:
                if order["id"] not in seen:
                    seen.add(order["id"])
                    self.delivered.setdefault(order["job_id"], time.monotonic())
                    body = {"generation": order["generation"], "state": "running"}
                    await self.call("POST", f"/allocations/{order['id']}/status", json=body)
            if self.protocol == "poll":
                await self._sleep(1.0)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)


async def _run_one(
    url: str, tokens: tuple[str, str], pid: int, nodes: int, protocol: str, seconds: float,
    submits: int, heartbeat_s: float,
) -> dict:  # fmt: skip
    agent_token, admin_token = tokens
    gen = Generator(url, agent_token, nodes, protocol, heartbeat_s)
    t0 = time.monotonic()
    await gen.register()
    registered_s = time.monotonic() - t0
    tasks = [asyncio.create_task(gen.heartbeat(n)) for n in gen.names]
    tasks += [asyncio.create_task(gen.orders(n)) for n in gen.names]
    await asyncio.sleep(max(5.0, heartbeat_s + 2))  # every node heard from, polls settled
    cpu0, req0, w0 = cpu_seconds(pid), gen.requests, time.monotonic()
    await asyncio.sleep(seconds)
    idle_cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - w0)
    idle_rps = (gen.requests - req0) / (time.monotonic() - w0)
    admin = httpx.AsyncClient(
        base_url=url + "/api/v1", headers={"Authorization": f"Bearer {admin_token}"}, timeout=60
    )
    submitted: dict[int, float] = {}
    sem = asyncio.Semaphore(16)

    async def submit() -> None:
        async with sem:
            at = time.monotonic()
            r = await admin.post(
                "/jobs", json={"request": "gpu=1", "tenant": "bench", "command": ["true"]}
            )
            if r.status_code == 201:
                submitted[r.json()["id"]] = at

    await asyncio.gather(*(submit() for _ in range(submits)))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(j in gen.delivered for j in submitted):
        await asyncio.sleep(0.1)
    lat = [gen.delivered[j] - t for j, t in submitted.items() if j in gen.delivered]
    gen.stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await gen.http.aclose()
    await admin.aclose()
    return {
        "registered_s": round(registered_s, 2),
        "idle_server_cpu_pct": round(100 * idle_cpu, 1),
        "idle_requests_per_s": round(idle_rps, 1),
        "submitted": len(submitted),
        "delivered": len(lat),
        "submit_to_order_p50_ms": round(float(np.percentile(lat, 50)) * 1000, 1) if lat else None,
        "submit_to_order_p99_ms": round(float(np.percentile(lat, 99)) * 1000, 1) if lat else None,
        "client_errors": gen.errors,
    }


def run_agents_bench(nodes: int, seconds: float, submits: int, heartbeat_s: float = 5.0,
                     database_url: str = "") -> dict[str, Any]:  # fmt: skip
    """Both protocols, each on a fresh server; figures as a dict (see the module docstring)."""
    if submits > nodes * 4:
        raise SpecError(f"bench agents: {submits} one-card jobs do not fit {nodes * 4} cards")
    out: dict[str, Any] = {"nodes": nodes, "idle_seconds": seconds, "submits": submits,
                           "heartbeat_s": heartbeat_s}  # fmt: skip
    for protocol in PROTOCOLS:
        data_dir = Path(tempfile.mkdtemp(prefix="gpupool-bench-agents-"))
        db = Database(database_url or f"sqlite:///{data_dir / 'gpupool.db'}")
        proc = None
        try:
            db.migrate()
            with db.write() as s:
                s.add(TenantRow(name="bench", parent=None, weight=1.0, created_at=time.time()))
                admin = create_user_token(s, "bench-admin", "admin")
                agent = create_user_token(s, "bench-agents", "agent", node="*")
            port = free_port()
            try:
                proc = start_server(data_dir, port, database_url=database_url,
                                    log_path=data_dir / "server.log")  # fmt: skip
            except ClientError as exc:
                raise SpecError(f"bench: {exc}") from None
            url = f"http://127.0.0.1:{port}"
            out[protocol] = asyncio.run(
                _run_one(
                    url, (agent, admin), proc.pid, nodes, protocol, seconds, submits, heartbeat_s
                )
            )
            out["backend"] = "sqlite" if db.is_sqlite else "postgresql"
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
            db.dispose()
            if not database_url:
                shutil.rmtree(data_dir, ignore_errors=True)
    return out
