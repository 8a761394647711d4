"""The service reconciler writes under the leader's fence (issue 60): a server that lost the
lead (another took it; it has not noticed yet) adds and stops no replica, and its services
thread lives on. It checked only its own in-memory flag, so two servers around a fail-over
could both add or stop replicas; and the ``LostLeadership`` its runner re-raises ended the
thread."""

import threading
import time

import pytest
from sqlalchemy import func, select, update

from gpupool.server.commit import LostLeadership
from gpupool.server.db.tables import JobRow, Meta
from gpupool.server.settings import Settings
from tests.support.cluster import ok, seed_cluster
from tests.support.live import live_server


def _jobs(srv) -> int:
    with srv.ctx.db.read() as s:
        return int(s.execute(select(func.count()).select_from(JobRow)).scalar_one())


def test_a_server_that_lost_the_lead_adds_no_replica_and_its_thread_lives_on(tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False, service_interval_s=0.3)) as srv:
        _lost_lead(srv)


def _lost_lead(srv) -> None:
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"team": 4})
    body = {"name": "chat", "tenant": "team", "request": "gpu=1", "command": ["true"],
            "target": 1, "min_replicas": 2}  # fmt: skip
    ok(admin.post("/api/v1/services", json=body), 201)
    with srv.ctx.db.write() as s:  # another server takes the lead
        s.execute(update(Meta).where(Meta.id == 1).values(leader_epoch=Meta.leader_epoch + 1))
    loop = srv.ctx.loop
    assert loop.leadership.held  # as far as this server knows
    with pytest.raises(LostLeadership):
        loop.services.step(force=True)
    assert _jobs(srv) == 0  # no replica added by the server that lost the lead
    thread = threading.Thread(target=loop._run_services, daemon=True)
    thread.start()
    time.sleep(3 * loop.settings.service_interval_s)
    alive = thread.is_alive()
    loop._stop.set()
    thread.join(timeout=10)
    assert alive and _jobs(srv) == 0
