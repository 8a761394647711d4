"""Kubernetes' zone rule for a pool (issue 44): when most nodes go silent at once the
network or the control plane failed, not the nodes, and requeueing every job would only
start it all again elsewhere, or nowhere — so none is marked lost; one node silent alone is."""

import time

from sqlalchemy import update

from gpupool.server.db.tables import NodeRow
from gpupool.server.liveness import mass_silence
from gpupool.server.settings import Settings
from tests.support.cluster import ok, seed_cluster, submit
from tests.support.live import live_server


def test_the_rule():
    assert mass_silence(3, 4, 0.55) and mass_silence(2, 3, 0.55)
    assert not mass_silence(1, 4, 0.55) and not mass_silence(2, 2, 0.55)  # too few to tell
    assert not mass_silence(10, 10, 1.1)  # above 1: off


def _silence(srv, names: list[str], seconds: float) -> None:
    with srv.ctx.db.write() as s:
        s.execute(update(NodeRow).where(NodeRow.name.in_(names)).values(heartbeat_at=seconds))


def test_most_nodes_silent_at_once_lose_nothing_one_alone_is_lost(tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False, heartbeat_timeout_s=30)) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=4, cards=2, tenants={"algo": 8})
        job = submit(admin, "gpu=1", "algo")
        srv.cycle()
        loop = srv.ctx.loop
        loop.leadership.since = 0.0  # led long enough to judge nodes
        now = time.time()
        _silence(srv, ["n0", "n1", "n2"], now - 60)
        mass = loop.check_liveness(now)
        states = {n["name"]: n["state"] for n in ok(admin.get("/api/v1/nodes"))["items"]}
        still = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["state"]
        _silence(srv, ["n0", "n1", "n2"], now)  # back
        _silence(srv, ["n3"], now - 60)
        alone = loop.check_liveness(now)
    assert mass == [] and set(states.values()) == {"ready"} and still == "admitted"
    assert alone == ["n3"]
