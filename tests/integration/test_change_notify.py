"""Change notifications on PostgreSQL: the commits that move the change feed's stamp (an
allocation generation, ``nodes_version``, a job event) notify a listening connection, so an
API process reads its stamp when something changed instead of five times a second; a bare
beat notifies nobody, and a dropped listening connection is taken again (the feed reads the
stamp at once, since a notification may have been missed)."""

import json
import threading
import time

import pytest
from sqlalchemy import text, update
from websockets.sync.client import connect

from gpupool.server.db.engine import Database
from gpupool.server.db.notify import ChangeListener
from gpupool.server.db.tables import Meta, NodeRow
from gpupool.server.settings import Settings
from tests.support.cluster import ok, seed_cluster, submit
from tests.support.live import live_server


@pytest.fixture
def db(postgres):
    database = Database(postgres.new_database())
    database.migrate()
    yield database
    database.dispose()


def _woken_within(listener: ChangeListener, stop: threading.Event, write) -> float:
    """Seconds ``listener.wait`` took to return with ``write`` committed meanwhile."""
    timer = threading.Timer(0.3, write)
    timer.start()
    started = time.monotonic()
    listener.wait(stop)
    timer.join()
    return time.monotonic() - started


def test_commits_that_move_the_stamp_notify_and_a_bare_beat_does_not(db):
    listener = ChangeListener(db.engine, fallback_s=3.0, tick_s=0.2)
    stop = threading.Event()
    listener.wait(stop)  # connects, and returns at once (whatever changed before: read it)
    assert listener.connects == 1

    def bump(**values):
        def write() -> None:
            with db.write() as s:
                s.execute(update(Meta).where(Meta.id == 1).values(**values))

        return write

    def beat() -> None:
        with db.write() as s:
            s.execute(update(NodeRow).values(heartbeat_at=time.time()))

    assert _woken_within(listener, stop, bump(generation=Meta.generation + 1)) < 1.5
    assert _woken_within(listener, stop, bump(nodes_version=Meta.nodes_version + 1)) < 1.5
    assert _woken_within(listener, stop, beat) >= 2.9  # the fallback, not the beat
    assert _woken_within(listener, stop, bump(leader_name="other")) >= 2.9
    listener.close()


def test_a_dropped_listening_connection_is_taken_again(db):
    listener = ChangeListener(db.engine, fallback_s=5.0, tick_s=0.2)
    stop = threading.Event()
    listener.wait(stop)
    with db.engine.connect() as conn:  # the database drops the listener's session
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"
            )
        )
        conn.commit()
    started = time.monotonic()
    listener.wait(stop)  # notices the drop: back at once, so the feed reads the stamp
    assert time.monotonic() - started < 2.0
    listener.wait(stop)  # connects again
    assert listener.connects == 2

    def write() -> None:
        with db.write() as s:
            s.execute(update(Meta).where(Meta.id == 1).values(generation=Meta.generation + 1))

    assert _woken_within(listener, stop, write) < 1.5
    stop.set()
    started = time.monotonic()
    listener.wait(stop)  # a stopped feed is not kept waiting
    assert time.monotonic() - started < 0.5
    listener.close()


def test_orders_reach_an_agents_channel_on_postgresql_without_polling(postgres, tmp_path):
    """An idle feed reads nothing (no stamp five times a second); a placement's commit
    notifies and the orders are pushed at once."""
    settings = Settings(
        data_dir=tmp_path,
        database_url=postgres.new_database(),
        log_json=False,
        agent_beat_flush_s=0.2,
    )
    with live_server(settings) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=1, tenants={"algo": 4})
        url = srv.url.replace("http://", "ws://") + "/api/v1/nodes/n0/channel"
        token = srv.token("agent-n0", "agent", node="n0")
        feed = srv.ctx.changes
        with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            first = json.loads(ws.recv(timeout=10))
            assert first["orders"]["orders"] == []
            reads: list[float] = []
            real = feed._read
            feed._read = lambda: (reads.append(time.monotonic()), real())[1]
            time.sleep(2.0)  # idle: polling every 0.2 s would read ten times
            assert len(reads) <= 1
            job = submit(admin, "gpu=1", tenant="algo")["id"]
            srv.cycle()
            started = time.monotonic()
            pushed = json.loads(ws.recv(timeout=5))
            assert time.monotonic() - started < 2.0  # not the 10 s fallback
            assert [o["job_id"] for o in pushed["orders"]["orders"]] == [job]
        ok(admin.get("/api/v1/nodes"))


def test_the_notifying_triggers_come_and_go_with_their_migration(db):
    from alembic import command

    from gpupool.server.db.engine import alembic_config

    def triggers() -> list[str]:
        with db.engine.connect() as conn:
            rows = conn.execute(text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"))
            return sorted(r[0] for r in rows)

    assert triggers() == ["gpupool_job_event_added", "gpupool_meta_changed"]
    with db.engine.connect() as conn:
        cfg = alembic_config(db.url)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0011")
        conn.commit()
    assert triggers() == []
    db.migrate()
    assert triggers() == ["gpupool_job_event_added", "gpupool_meta_changed"]
