"""Prometheus metrics: one registry per server (no module-level state). Pool, tenant and
device figures are read from the database at scrape time; device telemetry uses the DCGM
exporter's metric names so existing Grafana dashboards work.

With several API worker processes (``gpupool server --workers N``) any worker may answer a
scrape, and only the leader runs cycles: the server then runs prometheus-client's multiprocess
mode (``PROMETHEUS_MULTIPROC_DIR``, set before the workers start) and every scrape sums the
counters and histograms of all workers.
"""

import os
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from gpupool.server.alerts.rules import KINDS as ALERT_KINDS
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import (
    AlertRow,
    AllocationRow,
    DeviceRow,
    JobRow,
    NodeRow,
    TenantRow,
)

DCGM = (
    ("util_pct", "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("mem_used_mib", "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("temp_c", "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
    ("power_w", "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
)


MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"


class Metrics:
    def __init__(self, db: Database):
        self.registry = CollectorRegistry()
        self.api_latency = Histogram(
            "gpupool_api_request_seconds",
            "API request latency.",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.cycle_seconds = Histogram(
            "gpupool_scheduler_cycle_seconds",
            "Duration of one scheduling cycle (decide + commit).",
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
        )
        self.queue_wait = Histogram(
            "gpupool_queue_wait_seconds",
            "Time from entering the queue to admission.",
            ["tenant"],
            registry=self.registry,
            buckets=(0.1, 0.5, 1, 5, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600),
        )
        self.admissions = Counter(
            "gpupool_admissions", "Jobs admitted.", ["tenant"], registry=self.registry
        )
        self.preemptions = Counter("gpupool_preemptions", "Jobs preempted.", registry=self.registry)
        self.preemption_lost = Counter(
            "gpupool_preemption_lost_gpu_seconds",
            "Card-seconds of work preemptions cost jobs: the grace of a job that saves on a "
            "signal, all it ran for any other.",
            ["tenant"],
            registry=self.registry,
        )
        self.duty_last_ok = Gauge(
            "gpupool_duty_last_success_timestamp_seconds",
            "When each control-plane duty (scheduling, liveness, alerts, ...) last succeeded.",
            ["duty"],
            registry=self.registry,
            multiprocess_mode="max",
        )
        self.duty_failures = Counter(
            "gpupool_duty_failures", "Control-plane duty runs that failed.", ["duty"],
            registry=self.registry,
        )  # fmt: skip
        shared = os.environ.get(MULTIPROCESS_DIR)
        if shared:
            self.scrape = CollectorRegistry()
            MultiProcessCollector(self.scrape, path=shared)
        else:
            self.scrape = self.registry
        self.scrape.register(StateCollector(db))

    def duty_known(self, name: str) -> None:
        self.duty_failures.labels(name)

    def duty_ok(self, name: str, at: float) -> None:
        self.duty_last_ok.labels(name).set(at)

    def duty_failed(self, name: str) -> None:
        self.duty_failures.labels(name).inc()

    def exposition(self) -> bytes:
        """The text a scrape gets."""
        return generate_latest(self.scrape)


class StateCollector(Collector):
    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterator[Metric]:
        with self.db.read() as s:
            devices = s.execute(
                select(DeviceRow, NodeRow.pool).join(NodeRow, NodeRow.name == DeviceRow.node)
            ).all()
            allocs = s.execute(
                select(AllocationRow.tenant, AllocationRow.placement).where(
                    AllocationRow.state == "active"
                )
            ).all()
            queue = s.execute(
                select(JobRow.tenant, func.count())
                .where(JobRow.state == "pending")
                .group_by(JobRow.tenant)
            ).all()
            node_states = s.execute(
                select(NodeRow.state, func.count()).group_by(NodeRow.state)
            ).all()
            alerts = s.execute(
                select(AlertRow.kind, func.count())
                .where(AlertRow.state == "firing")
                .group_by(AlertRow.kind)
            ).all()
            logs = s.execute(select(TenantRow.name, TenantRow.log_bytes)).all()
        nodes = GaugeMetricFamily("gpupool_nodes", "Nodes by state.", labels=["state"])
        counts = dict(node_states)
        for state in ("ready", "lost", "fenced"):
            nodes.add_metric([state], counts.get(state, 0))
        yield nodes
        pool_of = {}
        total: dict[str, int] = defaultdict(int)
        for d, pool in devices:
            pool_of[(d.node, d.index)] = pool
            total[pool] += 1
        used_pct: dict[str, int] = defaultdict(int)
        tenant_pct: dict[str, int] = defaultdict(int)
        tenants_on: dict[tuple[str, int], set[str]] = defaultdict(set)
        for tenant, placement in allocs:
            for n in placement["nodes"]:
                for g in n["devices"]:
                    key = (n["node"], g["device"])
                    pct = 100 if g["exclusive"] else g["compute_pct"]
                    used_pct[pool_of.get(key, "unknown")] += pct
                    tenant_pct[tenant] += pct
                    tenants_on[key].add(tenant)
        alloc = GaugeMetricFamily(
            "gpupool_pool_gpus_allocated", "GPUs allocated (card equivalents).", labels=["pool"]
        )
        free = GaugeMetricFamily(
            "gpupool_pool_gpus_free", "GPUs not allocated (card equivalents).", labels=["pool"]
        )
        for pool, n in sorted(total.items()):
            alloc.add_metric([pool], used_pct[pool] / 100)
            free.add_metric([pool], n - used_pct[pool] / 100)
        yield alloc
        yield free
        per_tenant = GaugeMetricFamily(
            "gpupool_tenant_gpus_allocated", "GPUs allocated per tenant.", labels=["tenant"]
        )
        for tenant, pct in sorted(tenant_pct.items()):
            per_tenant.add_metric([tenant], pct / 100)
        yield per_tenant
        q = GaugeMetricFamily("gpupool_queue_length", "Pending jobs.", labels=["tenant"])
        for tenant, n in sorted(queue):
            q.add_metric([tenant], n)
        yield q
        labels = ["gpu", "UUID", "modelName", "Hostname", "node", "tenant"]
        families = {key: GaugeMetricFamily(name, doc, labels=labels) for key, name, doc in DCGM}
        for d, _pool in devices:
            tel = d.telemetry or {}
            tenant = ",".join(sorted(tenants_on.get((d.node, d.index), ())))
            values = [str(d.index), d.uuid, d.model, d.node, d.node, tenant]
            for field, family in families.items():
                if tel.get(field) is not None:
                    family.add_metric(values, float(tel[field]))
        yield from families.values()
        healthy = GaugeMetricFamily(
            "gpupool_gpu_healthy", "1 while the device reports healthy, else 0.", labels=labels
        )
        for d, _pool in devices:
            tenant = ",".join(sorted(tenants_on.get((d.node, d.index), ())))
            healthy.add_metric(
                [str(d.index), d.uuid, d.model, d.node, d.node, tenant], 1.0 if d.healthy else 0.0
            )
        yield healthy
        firing = GaugeMetricFamily(
            "gpupool_alerts_firing", "Alerts firing now, by kind (gpupool alerts).", labels=["kind"]
        )
        counted = dict(alerts)
        for kind in ALERT_KINDS:
            firing.add_metric([kind], counted.get(kind, 0))
        yield firing
        kept = GaugeMetricFamily(
            "gpupool_tenant_log_bytes",
            "Characters of job logs the server keeps per tenant (bounded by its log limit).",
            labels=["tenant"],
        )
        for tenant, size in sorted(logs):
            kept.add_metric([tenant], float(size or 0))
        yield kept
