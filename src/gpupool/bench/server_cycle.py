"""``gpupool bench cycle --server``: the server's own cycle at scale — the leader's
``run_once`` (snapshot read from the database, the engine's decision, the fenced commit)
over a database filled as a large pool would fill it, not the engine alone in memory.

The pool: ``bench cycle``'s synthetic cluster registered node by node as agents register
(``register_node``), its teams and guarantees as rows, half its cards taken by a first cycle
over the heavy teams' work; then ``pending`` jobs from every team are inserted in bulk and
the timed cycles run:

- **cold**: a new leader's first cycle (no snapshot kept: nodes, devices and live
  allocations read in full);
- **settle**: the next cycle, which reads back the allocations the cold one made;
- **steady**: after ``changes`` changes since the previous cycle — half of them jobs holding
  cards that ended, half new submissions — on the same leader (its snapshot kept).

Each cycle's snapshot, decide and commit times are the leader's own (``CycleTiming``); the
database's share is the snapshot's and the commit's (both are reads and writes of it).
"""

import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select

from gpupool.bench.cycle import CLASS_BY_KIND, bench_tenants
from gpupool.bench.placement import peak_rss_mb
from gpupool.bench.synthetic import job_mix, synthetic_cluster
from gpupool.model import Job, Node
from gpupool.server.cycle_timing import CycleTiming
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import JobRow, QuotaRow, TenantRow
from gpupool.server.lifecycle import finish
from gpupool.server.loop import SchedulerLoop
from gpupool.server.metrics import Metrics
from gpupool.server.node_registry import register_node
from gpupool.server.schemas import DeviceIn, NodeIn
from gpupool.server.settings import Settings

CHUNK = 2000  # rows per insert; nodes per write transaction


def node_in(node: Node) -> NodeIn:
    """A synthetic node as its agent would register it."""
    return NodeIn(
        name=node.name,
        cpu_millis=node.cpu_millis,
        memory_mib=node.memory_mib,
        labels=dict(node.labels),
        devices=[
            DeviceIn(
                index=d.index,
                model=d.model,
                vendor=d.vendor.value,
                memory_mib=d.memory_mib,
                uuid=d.uuid or f"GPU-{node.name}-{d.index}",
                mode=d.mode.value,
                island=d.island,
            )
            for d in node.devices
        ],
    )


def _rows(jobs: Iterable[Job], tenant_of: Callable[[int], str], t0: float) -> list[dict]:
    return [
        {
            "tenant": tenant_of(i),
            "name": f"bench-{i}",
            "request": str(job.request),
            "kind": job.kind.value,
            "priority_class": CLASS_BY_KIND[job.kind],
            "command": ["true"],
            "env": {},
            "submitted_by": "bench",
            "state": "pending",
            "submit_time": t0 + i * 0.001,
            "queued_at": t0 + i * 0.001,
        }
        for i, job in enumerate(jobs)
    ]


def _insert(db: Database, rows: list[dict]) -> None:
    for start in range(0, len(rows), CHUNK):
        with db.write() as s:
            s.execute(insert(JobRow), rows[start : start + CHUNK])


def _fill_pool(db: Database, nodes: list[Node], tenants: int, cards: int, now: float) -> None:
    with db.write() as s:
        for t in bench_tenants(tenants, cards):
            s.add(TenantRow(name=t.name, parent=t.parent, weight=1.0, created_at=now))
        s.flush()
        for t in bench_tenants(tenants, cards):
            for res, q in t.quotas.items():
                s.add(QuotaRow(tenant=t.name, resource=res, nominal=q.nominal,
                               borrowing_limit=q.borrowing_limit,
                               lending_limit=q.lending_limit))  # fmt: skip
    for start in range(0, len(nodes), CHUNK):
        with db.write() as s:
            for node in nodes[start : start + CHUNK]:
                register_node(s, node_in(node), now)


def _timed(loop: SchedulerLoop, now: float) -> dict[str, Any]:
    loop.run_once(now)
    t: CycleTiming = loop.timing
    return {
        "cycle_ms": round(1000 * t.total_s, 1),
        "snapshot_ms": round(1000 * t.snapshot_s, 1),
        "decide_ms": round(1000 * t.decide_s, 1),
        "commit_ms": round(1000 * t.commit_s, 1),
        "database_share": round((t.snapshot_s + t.commit_s) / t.total_s, 3) if t.total_s else 0,
        "pending": t.pending,
        "running": t.running,
        "admitted": t.admitted,
        "preempted": t.preempted,
    }


def _change(db: Database, changes: int, tenants: int, requests: str, seed: int,
            now: float) -> None:  # fmt: skip
    """Half ``changes`` jobs holding cards end (admitted: no agent runs them here), half new
    ones arrive."""
    ended = changes // 2
    with db.write() as s:
        running = s.execute(
            select(JobRow)
            .where(JobRow.state.in_(("admitted", "running")))
            .order_by(JobRow.id)
            .limit(ended)
        ).scalars()
        for job in running:
            finish(s, job, "succeeded", now, "bench: ended", "bench")
    rng = random.Random(seed + 11)
    fresh = job_mix(requests, changes - ended, seed + 13)
    _insert(db, _rows(fresh, lambda _: f"team-{rng.randrange(tenants):03d}", now))


def run_server_cycle_bench(
    nodes: int, gpus_per_node: int, pending: int, tenants: int, seed: int = 0,
    requests: str = "synthetic", database_url: str = "", changes: int = 300,
) -> dict[str, Any]:  # fmt: skip
    """Fill a database (SQLite in a temporary folder, or ``database_url``: an empty
    PostgreSQL database) and time the leader's cycles; figures as a dict."""
    data_dir = Path(tempfile.mkdtemp(prefix="gpupool-bench-server-cycle-"))
    db = Database(database_url or f"sqlite:///{data_dir / 'gpupool.db'}")
    out: dict[str, Any] = {"nodes": nodes, "gpus_per_node": gpus_per_node, "pending": pending,
                           "tenants": tenants, "requests": requests, "changes": changes,
                           "backend": "sqlite" if db.is_sqlite else "postgresql"}  # fmt: skip
    try:
        db.migrate()
        settings = Settings(data_dir=data_dir, database_url=db.url)
        now = time.time()
        cluster = synthetic_cluster(nodes, gpus_per_node, seed)
        cards = nodes * gpus_per_node
        t0 = time.perf_counter()
        _fill_pool(db, cluster, tenants, cards, now)
        out["fill_nodes_s"] = round(time.perf_counter() - t0, 1)

        heavy = max(1, tenants // 5)  # a fifth of the teams did most of the earlier work
        rng = random.Random(seed)
        warm = job_mix(requests, max(1, cards // 2), seed + 7)
        _insert(db, _rows(warm, lambda _: f"team-{rng.randrange(heavy):03d}", now - 3600))
        loop = SchedulerLoop(db, settings, Metrics(db))
        assert loop.leadership.try_acquire(), "bench: the empty database has a leader"
        out["warm_cycle"] = _timed(loop, now - 1800)
        with db.write() as s:  # what did not fit is not part of the timed queue
            s.execute(JobRow.__table__.delete().where(JobRow.state == "pending"))

        t0 = time.perf_counter()
        queue = job_mix(requests, pending, seed)
        _insert(db, _rows(queue, lambda _: f"team-{rng.randrange(tenants):03d}", now - 60))
        out["fill_pending_s"] = round(time.perf_counter() - t0, 1)

        loop.leadership.release()
        leader = SchedulerLoop(db, settings, Metrics(db))  # a new leader: nothing kept
        assert leader.leadership.try_acquire(), "bench: the lead was not handed over"
        out["cold_cycle"] = _timed(leader, now)
        out["settle_cycle"] = _timed(leader, now + 1)  # reads back what the cold one bound
        _change(db, changes, tenants, requests, seed, now + 2)
        out["steady_cycle"] = _timed(leader, now + 3)
        out["peak_rss_mb"] = peak_rss_mb()
        out["database_size_mb"] = _database_mb(db)
    finally:
        db.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


def _database_mb(db: Database) -> float:
    """The database's size on disk (SQLite: its file, journal and WAL)."""
    if db.is_sqlite:
        main = Path(db.url.removeprefix("sqlite:///"))
        files = [p for p in main.parent.glob(main.name + "*") if p.is_file()]
        return round(sum(os.path.getsize(p) for p in files) / 2**20, 2)
    with db.read() as s:
        size = s.execute(select(func.pg_database_size(func.current_database()))).scalar_one()
    return round(int(size) / 2**20, 2)
