"""Prometheus and Grafana out of the box (deploy/): the alerting rules pass promtool's checks
and unit tests, every metric the Grafana dashboard queries is on a live server's /metrics,
and a real Prometheus on loopback scrapes a real gpupool server with its token and answers a
query about it through its HTTP API."""

import json
import os
import re
import shutil
import subprocess
import time

import httpx
import pytest

from gpupool.server.process import free_port
from tests.support.cluster import ok, seed_cluster, submit
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")

if (PROMTOOL is None or PROMETHEUS is None) and os.environ.get("GPUPOOL_REQUIRE_PROMETHEUS"):
    raise RuntimeError("prometheus is required here (GPUPOOL_REQUIRE_PROMETHEUS) but missing")
needs_prometheus = pytest.mark.skipif(
    PROMTOOL is None or PROMETHEUS is None,
    reason="Debian's prometheus is not installed (apt-get install prometheus; CI installs it)",
)


@needs_prometheus
def test_the_alerting_rules_pass_promtool():
    rules = DEPLOY / "prometheus"
    for args in (
        ["check", "rules", "gpupool-rules.yml"],
        ["test", "rules", "gpupool-rules.test.yml"],
    ):
        out = subprocess.run(
            [PROMTOOL, *args], cwd=rules, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stdout + out.stderr


def _busy_cluster(server) -> None:
    """Devices with telemetry, a live allocation, a firing alert: every family has samples."""
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    submit(admin, "gpu=1", "algo")
    server.cycle()
    submit(admin, "gpu=4", "algo")  # waits: a queue length
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    tel = [{"index": i, "util_pct": 50.0, "mem_used_mib": 1000, "temp_c": 60.0, "power_w": 200.0,
            "healthy": i != 3} for i in range(4)]  # fmt: skip
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": tel}))
    assert server.ctx.loop.duties.run_due(time.time()) == []  # every duty once, alerts too


def _families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.M))


def test_every_metric_the_grafana_dashboard_queries_exists(sqlite_server):
    _busy_cluster(sqlite_server)
    metrics = sqlite_server.admin().get("/metrics")
    assert metrics.status_code == 200
    families = _families(metrics.text)
    dashboard = json.loads((DEPLOY / "grafana" / "gpupool.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 15
    used = {m for e in exprs for m in re.findall(r"\b(gpupool_\w+|DCGM_\w+)", e)}
    for name in used:
        base = re.sub(r"_(bucket|sum|count|total)$", "", name)
        assert name in families or base in families, f"{name} is not on /metrics"
        samples = [line for line in metrics.text.splitlines() if line.startswith(name)]
        assert samples or name.endswith("_bucket"), f"{name} has no sample"
    rules = (DEPLOY / "prometheus" / "gpupool-rules.yml").read_text()
    for name in set(re.findall(r"\b(gpupool_\w+|DCGM_\w+)", rules)):
        assert name in families, f"the rules use {name}, which /metrics lacks"


@needs_prometheus
def test_a_real_prometheus_scrapes_gpupool_with_its_token(sqlite_server, tmp_path):
    _busy_cluster(sqlite_server)
    token = sqlite_server.token("prometheus", "metrics")
    (tmp_path / "token").write_text(token)
    shutil.copy(DEPLOY / "prometheus" / "gpupool-rules.yml", tmp_path / "gpupool-rules.yml")
    config = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    config = config.replace("/etc/prometheus/gpupool-token", str(tmp_path / "token"))
    config = config.replace("127.0.0.1:8080", sqlite_server.url.removeprefix("http://"))
    config = config.replace("scrape_interval: 15s", "scrape_interval: 1s")
    (tmp_path / "prometheus.yml").write_text(config)
    port = free_port()
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
    )  # fmt: skip
    try:
        api = f"http://127.0.0.1:{port}/api/v1"
        deadline = time.monotonic() + 60
        result: list = []
        while time.monotonic() < deadline and not result:
            time.sleep(0.5)
            try:
                r = httpx.get(f"{api}/query", params={"query": "gpupool_pool_gpus_free"}, timeout=2)
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                result = r.json()["data"]["result"]
        assert result, (tmp_path / "prometheus.log").read_text()[-2000:]
        assert result[0]["metric"]["pool"] == "default" and float(result[0]["value"][1]) == 3.0
        targets = httpx.get(f"{api}/targets", timeout=5).json()["data"]["activeTargets"]
        assert [t["health"] for t in targets] == ["up"]  # the token was accepted
        groups = httpx.get(f"{api}/rules", timeout=5).json()["data"]["groups"]
        assert [g["name"] for g in groups] == ["gpupool"] and len(groups[0]["rules"]) == 9
    finally:
        prom.terminate()
        prom.wait(timeout=30)
