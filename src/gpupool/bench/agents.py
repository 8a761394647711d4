"""``gpupool bench agents``: what N agents cost a real server, played by generator processes
speaking the exact agent protocol with N node identities (``gpupool.bench.agent_swarm``; no
workloads run).

For each way of asking for orders — ``poll`` (every second, as agents before long polls did),
``long-poll`` (``wait`` + ``known``) and ``channel`` (the agent's WebSocket: beats, with
telemetry once a minute, and pushed orders) — on a fresh server: register N nodes (4 A100
each), heartbeat each every ``heartbeat_s``, keep asking for orders; after a warm-up,
measure the server's CPU (all its processes) over ``seconds`` of idling — and before any agent
starts, with the nodes registered, its baseline (scheduler, alerts, change feeds: what the
server costs with no agent at all), so ``idle_above_baseline_pct`` is what the agents add
(both also per server process: ``*_cpu_pct_by_process``) — then submit a burst of one-card
jobs and time submit → running on the server's clock (the agent reports an order running as
soon as it has it); then let some nodes fall silent and time until the server declares them
lost (its ``heartbeat_timeout_s`` plus how long it takes to notice).
"""

import asyncio
import multiprocessing
import queue
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sqlalchemy import func, select, update

from gpupool.bench.agent_swarm import NODE_BODY, PROTOCOLS, Part, play
from gpupool.bench.procfs import cpu_seconds, server_processes
from gpupool.client import ClientError
from gpupool.model import SpecError
from gpupool.server.auth import create_user_token
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import JobEventRow, JobRow, NodeRow, TenantRow
from gpupool.server.node_registry import register_node
from gpupool.server.process import free_port, start_server
from gpupool.server.schemas import NodeIn
from gpupool.server.settings import Settings


def node_names(nodes: int) -> list[str]:
    return [f"agent-{i:05d}" for i in range(nodes)]


def _heard_now(db: Database) -> None:
    """Every node heard from now, as if its agent had just registered."""
    with db.write() as s:
        s.execute(update(NodeRow).values(heartbeat_at=time.time()))


def _server_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(p) for p in pids)


def _cpu_by_role(roles: dict[int, str]) -> dict[str, float]:
    """CPU seconds so far of each role (scheduler, api, server) of the server's processes."""
    out: dict[str, float] = {}
    for pid, role in roles.items():
        out[role] = out.get(role, 0.0) + cpu_seconds(pid)
    return out


def _pct_by_role(before: dict[str, float], after: dict[str, float], seconds: float) -> dict:
    return {role: round(100 * (after[role] - before.get(role, 0.0)) / seconds, 1) for role in after}


async def _submit_burst(url: str, token: str, submits: int) -> list[int]:
    async with httpx.AsyncClient(
        base_url=url + "/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as admin:
        sem = asyncio.Semaphore(16)

        async def one() -> int | None:
            async with sem:
                body = {"request": "gpu=1", "tenant": "bench", "command": ["true"]}
                r = await admin.post("/jobs", json=body)
                return r.json()["id"] if r.status_code == 201 else None

        return [j for j in await asyncio.gather(*(one() for _ in range(submits))) if j]


def _to_running(db: Database, jobs: list[int], deadline_s: float) -> list[float]:
    """Seconds from submission to the ``running`` event of each job that got there."""
    deadline = time.monotonic() + deadline_s
    rows: Sequence[Any] = []
    while time.monotonic() < deadline:
        with db.read() as s:
            rows = s.execute(
                select(JobRow.submit_time, func.min(JobEventRow.time))
                .join(JobEventRow, JobEventRow.job_id == JobRow.id)
                .where(JobRow.id.in_(jobs), JobEventRow.to_state == "running")
                .group_by(JobRow.id)
            ).all()
        if len(rows) == len(jobs):
            break
        time.sleep(0.2)
    return [t - submitted for submitted, t in rows]


def _lost(db: Database) -> set[str]:
    with db.read() as s:
        return set(s.execute(select(NodeRow.name).where(NodeRow.state == "lost")).scalars())


def _run_one(
    url: str, db: Database, tokens: tuple[str, str], roles: dict[int, str], nodes: int,
    protocol: str, seconds: float, submits: int, heartbeat_s: float, timeout_s: float,
    processes: int, silent: int,
) -> dict[str, Any]:  # fmt: skip
    agent_token, admin_token = tokens
    names = node_names(nodes)
    server = sorted(roles)
    # the nodes are registered (by the caller) and no agent runs yet: what the server costs
    # on its own with this many nodes (its scheduler, alerts, change feeds); a new leader
    # judges no node lost before one timeout, and this is over well before
    _heard_now(db)  # none is lost while measured: 3/4 of a timeout at most
    time.sleep(min(3.0, timeout_s / 4))
    cpu0, w0, by0 = _server_cpu(server), time.monotonic(), _cpu_by_role(roles)
    time.sleep(min(seconds, timeout_s / 2))
    baseline_cpu = (_server_cpu(server) - cpu0) / (time.monotonic() - w0)
    baseline_by = _pct_by_role(by0, _cpu_by_role(roles), time.monotonic() - w0)
    _heard_now(db)  # and a full timeout for the agents to come
    quiet = set(names[:: max(1, nodes // silent)][:silent]) if silent else set()
    mp = multiprocessing.get_context("spawn")
    ready, silence, stop = mp.Queue(), mp.Event(), mp.Event()
    counters = [(mp.Value("q", 0), mp.Value("q", 0)) for _ in range(processes)]
    children = []
    for k in range(processes):
        share = names[k::processes]
        part = Part(url, agent_token, share, [n for n in share if n in quiet], protocol,
                    heartbeat_s)  # fmt: skip
        children.append(mp.Process(target=play, args=(part, ready, silence, stop, *counters[k])))
    t0 = time.monotonic()
    for c in children:
        c.start()
    try:
        for _ in children:
            try:
                failed = ready.get(timeout=600)
            except queue.Empty:
                raise SpecError("bench: the generators did not register within 600 s") from None
            if failed:
                raise SpecError(failed)
        registered_s = time.monotonic() - t0
        time.sleep(max(5.0, heartbeat_s + 2))  # every node heard from, polls settled

        def requests() -> int:
            return sum(r.value for r, _ in counters)

        cpu0, req0, w0, by0 = _server_cpu(server), requests(), time.monotonic(), _cpu_by_role(roles)
        time.sleep(seconds)
        idle_s = time.monotonic() - w0
        idle_by = _pct_by_role(by0, _cpu_by_role(roles), idle_s)
        idle_cpu, idle_rps = (_server_cpu(server) - cpu0) / idle_s, (requests() - req0) / idle_s
        cpu0, w0 = _server_cpu(server), time.monotonic()
        jobs = asyncio.run(_submit_burst(url, admin_token, submits))
        waits = _to_running(db, jobs, 120)
        burst_cpu = (_server_cpu(server) - cpu0) / (time.monotonic() - w0)
        lost_before = _lost(db)
        silence.set()
        silenced_at = time.monotonic()
        detected: float | None = None
        while quiet and time.monotonic() < silenced_at + 2 * timeout_s + 60:
            if quiet <= _lost(db):
                detected = time.monotonic() - silenced_at
                break
            time.sleep(0.25)
        falsely = (_lost(db) | lost_before) - quiet
    finally:
        stop.set()
        for c in children:
            c.join(timeout=60)
            if c.is_alive():
                c.kill()
    return {
        "registered_s": round(registered_s, 2),
        "baseline_server_cpu_pct": round(100 * baseline_cpu, 1),
        "idle_server_cpu_pct": round(100 * idle_cpu, 1),
        "idle_above_baseline_pct": round(100 * (idle_cpu - baseline_cpu), 1),
        "baseline_cpu_pct_by_process": baseline_by,
        "idle_cpu_pct_by_process": idle_by,
        "idle_requests_per_s": round(idle_rps, 1),
        "burst_server_cpu_pct": round(100 * burst_cpu, 1),
        "submitted": len(jobs),
        "running": len(waits),
        "submit_to_running_p50_ms": round(float(np.percentile(waits, 50)) * 1000, 1)
        if waits
        else None,
        "submit_to_running_p99_ms": round(float(np.percentile(waits, 99)) * 1000, 1)
        if waits
        else None,
        "silenced": len(quiet),
        "lost_detected_s": round(detected, 1) if detected is not None else None,
        "lost_falsely": len(falsely),
        "client_errors": sum(e.value for _, e in counters),
    }


def run_agents_bench(
    nodes: int, seconds: float, submits: int, heartbeat_s: float | None = None,
    database_url: str = "",
    *, workers: int = 1, processes: int = 1, silent: int = 0, timeout_s: float = 30.0,
    protocols: tuple[str, ...] = PROTOCOLS,
) -> dict[str, Any]:  # fmt: skip
    """Each protocol on a fresh server; figures as a dict (see the module docstring).
    ``heartbeat_s`` None: what that server advises its agents."""
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown or not protocols:
        raise SpecError(f"bench agents: protocols are {', '.join(PROTOCOLS)}")
    if submits > nodes * 4:
        raise SpecError(f"bench agents: {submits} one-card jobs do not fit {nodes * 4} cards")
    if silent > nodes:
        raise SpecError(f"bench agents: cannot silence {silent} of {nodes} nodes")
    advised = Settings(heartbeat_timeout_s=timeout_s).heartbeat_advice_s
    heartbeat_s = heartbeat_s or advised
    out: dict[str, Any] = {"nodes": nodes, "idle_seconds": seconds, "submits": submits,
                           "heartbeat_s": heartbeat_s, "heartbeat_advised_s": advised,
                           "heartbeat_timeout_s": timeout_s,
                           "workers": workers, "generator_processes": processes}  # fmt: skip
    for protocol in protocols:
        data_dir = Path(tempfile.mkdtemp(prefix="gpupool-bench-agents-"))
        db = Database(database_url or f"sqlite:///{data_dir / 'gpupool.db'}")
        proc = None
        try:
            db.migrate()
            with db.write() as s:
                s.add(TenantRow(name="bench", parent=None, weight=1.0, created_at=time.time()))
                admin = create_user_token(s, "bench-admin", "admin")
                agent = create_user_token(s, "bench-agents", "agent", node="*")
                for name in node_names(nodes):  # as their agents will (again) at the start
                    register_node(s, NodeIn(name=name, **NODE_BODY), time.time())
            port = free_port()
            try:
                proc = start_server(data_dir, port, database_url=database_url, workers=workers,
                                    env={"GPUPOOL_HEARTBEAT_TIMEOUT_S": str(timeout_s)},
                                    log_path=data_dir / "server.log")  # fmt: skip
            except ClientError as exc:
                raise SpecError(f"bench: {exc}") from None
            roles = {proc.pid: "supervisor", **server_processes(proc.pid)}
            out[protocol] = _run_one(
                f"http://127.0.0.1:{port}", db, (agent, admin), roles, nodes,
                protocol, seconds, submits, heartbeat_s, timeout_s, processes, silent,
            )  # fmt: skip
            out["backend"] = "sqlite" if db.is_sqlite else "postgresql"
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
            db.dispose()
            if not database_url:
                shutil.rmtree(data_dir, ignore_errors=True)
    return out
