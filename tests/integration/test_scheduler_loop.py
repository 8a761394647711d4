"""The loop that joins engine and database: preemption commits, fencing, metrics, migrations."""

import time

import pytest
from sqlalchemy import select, update

from gpupool.server.commit import LostLeadership
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import Base, Meta, QuotaRow
from gpupool.server.leader import Leadership
from tests.support.cluster import ok, seed_cluster, started, submit


def test_preemption_is_committed_with_events_and_usage(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=2, tenants={"team": 2})
    low = submit(admin, "gpu=2", "team", priority_class="dev-test")
    server.cycle()
    assert ok(admin.get(f"/api/v1/jobs/{low['id']}"))["state"] == "admitted"
    started(admin, low)  # its workload runs: preempted, it is metered
    high = submit(admin, "gpu=2", "team", priority_class="online-inference")
    server.cycle()
    high_now = ok(admin.get(f"/api/v1/jobs/{high['id']}"))
    low_now = ok(admin.get(f"/api/v1/jobs/{low['id']}"))
    assert high_now["state"] == "admitted" and low_now["state"] == "pending"
    assert low_now["reason"].startswith(f"preempted by job {high['id']}")
    events = [e["to_state"] for e in ok(admin.get(low_now["events_url"]))]
    assert events == ["pending", "admitted", "running", "preempted", "pending"]
    victim_alloc = ok(admin.get("/api/v1/allocations", params={"state": "released"}))["items"]
    assert [a["job_id"] for a in victim_alloc] == [low["id"]]
    assert high_now["allocation"]["after"] == [victim_alloc[0]["id"]]  # agent stops it first
    assert ok(admin.get("/api/v1/usage"))["items"][0]["job_id"] == low["id"]


def test_a_deposed_leader_writes_nothing(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    server.cycle()  # this process leads now
    job = submit(admin, "gpu=1", "algo")
    with server.ctx.db.write() as s:  # someone else took the lead meanwhile
        s.execute(update(Meta).values(leader_epoch=Meta.leader_epoch + 1))
    with pytest.raises(LostLeadership):
        server.ctx.loop.run_once()
    assert ok(admin.get(f"/api/v1/jobs/{job['id']}"))["state"] == "pending"
    assert ok(admin.get("/api/v1/allocations"))["total"] == 0


def test_generation_grows_with_every_commit(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    gens = []
    for _ in range(3):
        submit(admin, "gpu=1", "algo")
        server.cycle()
    for a in ok(admin.get("/api/v1/allocations"))["items"]:
        gens.append(a["generation"])
    assert sorted(gens) == gens[::-1] and len(set(gens)) == 3


def test_only_one_leader_at_a_time(database_url):
    db = Database(database_url)
    db.migrate()
    first, second = Leadership(db, "one"), Leadership(db, "two")
    try:
        assert first.try_acquire() and not second.try_acquire()
        epoch = first.epoch
        first.release()
        assert second.try_acquire() and second.epoch == epoch + 1
        with db.read() as s:
            assert s.execute(select(Meta.leader_name)).scalar_one() == "two"
    finally:
        first.release()
        second.release()
        db.dispose()


def test_metrics_expose_pool_tenant_queue_and_dcgm_names(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
    submit(admin, "gpu=1", "algo")
    submit(admin, "gpu=2", "algo")  # fits the node, not the one card left: it queues
    server.cycle()
    tel = {
        "devices": [
            {"index": 0, "util_pct": 87.5, "mem_used_mib": 30000, "temp_c": 61, "power_w": 310.5}
        ]
    }
    ok(admin.post("/api/v1/nodes/n0/heartbeat", json=tel))
    scrape = server.client(server.token("prometheus", "metrics"))
    text = scrape.get("/metrics").text
    assert 'gpupool_pool_gpus_allocated{pool="default"} 1.0' in text
    assert 'gpupool_pool_gpus_free{pool="default"} 1.0' in text
    assert 'gpupool_tenant_gpus_allocated{tenant="algo"} 1.0' in text
    assert 'gpupool_queue_length{tenant="algo"} 1.0' in text
    assert "gpupool_scheduler_cycle_seconds_count 1.0" in text
    assert 'gpupool_queue_wait_seconds_count{tenant="algo"} 1.0' in text
    assert "gpupool_api_request_seconds_bucket" in text
    util = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(util) == 1 and 'gpu="0"' in util[0] and 'tenant="algo"' in util[0]
    assert util[0].endswith(" 87.5") and 'Hostname="n0"' in util[0]
    assert "DCGM_FI_DEV_FB_USED{" in text and "DCGM_FI_DEV_POWER_USAGE{" in text


def test_unhealthy_device_is_skipped_after_a_heartbeat(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
    bad = {"devices": [{"index": 0, "healthy": False}]}
    ok(admin.post("/api/v1/nodes/n0/heartbeat", json=bad))
    jobs = [submit(admin, "gpu=1", "algo") for _ in range(2)]
    server.cycle()
    states = [ok(admin.get(f"/api/v1/jobs/{j['id']}")) for j in jobs]
    assert sorted(j["state"] for j in states) == ["admitted", "pending"]
    placed = next(j for j in states if j["state"] == "admitted")
    assert placed["allocation"]["nodes"][0]["devices"][0]["device"] == 1


def test_migrations_match_the_tables_and_upgrade_in_place(database_url):
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import text

    from gpupool.server.db.engine import alembic_config

    db = Database(database_url)
    try:
        with db.engine.connect() as conn:  # a database of the previous release, with a quota
            cfg = alembic_config(database_url)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0006")
            conn.execute(text("INSERT INTO tenants (name, weight, created_at) VALUES ('a', 1, 0)"))
            conn.execute(
                text("INSERT INTO quotas (tenant, flavour, nominal) VALUES ('a', 'gpu', 300)")
            )
            conn.commit()
        db.migrate()
        with db.read() as s:  # 0007 renamed the column and kept the row
            assert s.execute(select(QuotaRow.resource, QuotaRow.nominal)).one() == ("gpu", 300)
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], diff
        with db.write() as s:
            s.execute(update(Meta).values(generation=41))
        db.migrate()  # an existing database at head: upgraded in place, data kept
        with db.read() as s:
            assert s.execute(select(Meta.generation)).scalar_one() == 41
    finally:
        db.dispose()


def test_usage_summary_counts_live_allocations(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    job = submit(admin, "gpu=2", "algo")
    server.cycle(now=time.time() - 100)  # admitted 100 s ago
    started(admin, job)  # and started at once
    rows = ok(admin.get("/api/v1/usage/summary"))["items"]
    assert len(rows) == 1 and rows[0]["tenant"] == "algo" and rows[0]["model"] == "A100-80G"
    assert 2 * 100 * 99 <= rows[0]["compute_pct_seconds"] <= 2 * 100 * 110
    assert rows[0]["device_seconds"] == rows[0]["compute_pct_seconds"] // 100
