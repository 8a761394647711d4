"""``gpupool bench api``: submissions per second and submit-to-placed latency of a real
server process on loopback, with simulated nodes registered directly in its database."""

import http.client
import json
import os
import queue
import random
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from gpupool.bench.procfs import cpu_seconds, server_processes
from gpupool.client import ClientError
from gpupool.model import SpecError, make_devices
from gpupool.server.auth import create_user_token
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import DeviceRow, JobEventRow, JobRow, NodeRow, TenantRow
from gpupool.server.process import free_port, start_server

MIX = (("gpu=1", 6), ("gpu=2", 2), ("gpu_share=0.5,gpu_mem=10GiB", 2))


def _seed(db: Database, nodes: int, gpus_per_node: int) -> str:
    now = time.time()
    with db.write() as s:
        s.add(TenantRow(name="bench", parent=None, weight=1.0, created_at=now))
        for i in range(nodes):
            name = f"sim-{i:05d}"
            s.add(
                NodeRow(
                    name=name,
                    pool="default",
                    cpu_millis=128_000,
                    memory_mib=1024 * 1024,
                    labels={},
                    state="ready",
                    schedulable=True,
                    registered_at=now,
                    heartbeat_at=now,
                )
            )
        s.flush()  # nodes before the devices that refer to them
        for i in range(nodes):
            name = f"sim-{i:05d}"
            for d in make_devices("A100-80G", gpus_per_node, node=name):
                s.add(
                    DeviceRow(
                        node=name,
                        index=d.index,
                        model=d.model,
                        vendor=d.vendor.value,
                        memory_mib=d.memory_mib,
                        uuid=d.uuid,
                        healthy=True,
                        mode="share" if i % 4 == 3 else "whole",
                        island=d.island,
                        pcie_switch=d.pcie_switch,
                        telemetry={},
                    )
                )
        return create_user_token(s, "bench", "admin")


def _load(port: int, token: str, submits: int, concurrency: int, seed: int) -> list[float]:
    """Submit from ``concurrency`` threads over keep-alive connections. The standard
    library's ``http.client`` is the load generator because it is light: on this 2-core
    machine httpx's async pool spent more CPU than the server it was measuring (a trivial
    FastAPI endpoint: ~190 requests/s through one httpx.AsyncClient, ~2,400/s with
    http.client threads)."""
    rng = random.Random(seed)
    specs = [s for s, w in MIX for _ in range(w)]
    bodies: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    for i in range(submits):
        body = {
            "request": rng.choice(specs),
            "tenant": "bench",
            "idempotency_key": f"b-{i}",
            "command": ["python3", "train.py", f"--run={i}"],
        }
        bodies.put(json.dumps(body).encode())
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    failures: list[str] = []

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            while not failures:
                try:
                    body = bodies.get_nowait()
                except queue.Empty:
                    return
                started = time.perf_counter()
                conn.request("POST", "/api/v1/jobs", body=body, headers=headers)
                resp = conn.getresponse()
                text = resp.read()
                if resp.status not in (200, 201):
                    failures.append(f"{resp.status}: {text[:200]!r}")
                    return
                latencies.append(time.perf_counter() - started)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SpecError(f"bench: a submission was refused: {failures[0]}")
    return latencies


def _where_time_goes(
    port: int, token: str, cpu_before: dict[int, tuple[str, float]], load_cpu: float, elapsed: float
) -> dict[str, Any]:
    """CPU seconds per kind of process during the submissions, and the server's own
    averages from its /metrics: the submission route's time and the scheduling cycles."""
    cpu: dict[str, float] = {"load_generator": round(load_cpu, 2)}
    for pid, (kind, before) in cpu_before.items():
        cpu[kind] = round(cpu.get(kind, 0.0) + cpu_seconds(pid) - before, 2)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            route = sample.labels.get("route"), sample.labels.get("method")
            if family.name == "gpupool_api_request_seconds" and route != ("/api/v1/jobs", "POST"):
                continue
            if sample.name.endswith(("_sum", "_count")):
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    submits = sums.get("gpupool_api_request_seconds_count", 0.0)
    cycles = sums.get("gpupool_scheduler_cycle_seconds_count", 0.0)
    return {
        "cpu_seconds": cpu,
        "cpu_share_of_machine": round(sum(cpu.values()) / (elapsed * (os.cpu_count() or 1)), 3),
        "submit_route_mean_ms": round(
            1000 * sums.get("gpupool_api_request_seconds_sum", 0.0) / max(1.0, submits), 2
        ),
        "cycles": int(cycles),
        "cycle_mean_ms": round(
            1000 * sums.get("gpupool_scheduler_cycle_seconds_sum", 0.0) / max(1.0, cycles), 1
        ),
    }


def run_api_bench(
    nodes: int,
    gpus_per_node: int,
    submits: int,
    concurrency: int,
    database_url: str = "",
    seed: int = 0,
    workers: int = 1,
) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="gpupool-bench-api-"))
    url_db = database_url or f"sqlite:///{data_dir / 'gpupool.db'}"
    db = Database(url_db)
    proc = None
    try:
        db.migrate()
        token = _seed(db, nodes, gpus_per_node)
        port = free_port()
        try:
            proc = start_server(
                data_dir,
                port,
                database_url=database_url,
                workers=workers,
                env={"GPUPOOL_HEARTBEAT_TIMEOUT_S": "86400"},  # the bench's nodes have no agent
                log_path=data_dir / "server.log",
            )
        except ClientError as exc:
            raise SpecError(f"bench: {exc}") from None
        processes = server_processes(proc.pid)
        cpu_before = {pid: (kind, cpu_seconds(pid)) for pid, kind in processes.items()}
        load_started = time.process_time()
        started = time.perf_counter()
        latencies = _load(port, token, submits, concurrency, seed)
        elapsed = time.perf_counter() - started
        load_cpu = time.process_time() - load_started
        where = _where_time_goes(port, token, cpu_before, load_cpu, elapsed)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # every job placed (they all fit), bounded wait
            with db.read() as s:
                pending = s.execute(select(JobRow.id).where(JobRow.state == "pending")).first()
            if pending is None:
                break
            time.sleep(0.2)
        with db.read() as s:
            rows = s.execute(
                select(JobRow.submit_time, JobEventRow.time)
                .join(JobEventRow, JobEventRow.job_id == JobRow.id)
                .where(JobEventRow.to_state == "admitted")
            ).all()
        placed = np.array([t - submit for submit, t in rows]) if rows else np.array([np.nan])
        return {
            "backend": "sqlite" if db.is_sqlite else "postgresql",
            "nodes": nodes,
            "gpus": nodes * gpus_per_node,
            "submits": submits,
            "concurrency": concurrency,
            "workers": workers,
            "seconds": round(elapsed, 3),
            "submits_per_s": round(submits / elapsed, 1),
            "submit_p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 2),
            "submit_p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 2),
            "placed": len(rows),
            "submit_to_placed_p50_ms": round(float(np.percentile(placed, 50)) * 1000, 1),
            "submit_to_placed_p99_ms": round(float(np.percentile(placed, 99)) * 1000, 1),
            **where,
        }
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        db.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)
