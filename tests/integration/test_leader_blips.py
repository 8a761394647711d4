"""The scheduler lead across a PostgreSQL outage of seconds (issue 44's first finding, found
while issue 42's tests ran): taking the lead raised ``OperationalError`` in the scheduler's
thread, which died — both servers said ``leader: false``, ``/healthz`` 200, and new jobs
stayed queued until a restart. Now the outage is "not the leader yet" and the loop asks again.
Each test runs a PostgreSQL of its own, stopped and started again on the same port."""

import re
import time

import pytest
from sqlalchemy import text

from gpupool.server.db.engine import Database
from gpupool.server.leader import Leadership
from gpupool.server.settings import Settings
from tests.support.agents import wait_for
from tests.support.cluster import ok, seed_cluster, submit
from tests.support.live import live_server
from tests.support.postgres import PostgresServer


@pytest.fixture
def own_postgres():
    server = PostgresServer.start()
    yield server
    server.stop()


def test_taking_the_lead_while_the_database_is_away_is_no_and_later_yes(own_postgres):
    url = own_postgres.new_database()
    db = Database(url)
    db.migrate()
    lead = Leadership(db, "a")
    try:
        assert lead.try_acquire()
        own_postgres.halt()
        assert not lead.check()  # its lock's connection is gone
        assert not lead.try_acquire()  # the database is away: no, not an exception
        own_postgres.resume()
        assert wait_for("the lead again", lead.try_acquire, 20)
        assert lead.held  # (the epoch it bumped may be gone: the tests' PostgreSQL runs
        # without synchronous commits, and an immediate stop is a crash)
    finally:
        lead.release()
        db.dispose()


def test_scheduling_goes_on_after_a_five_second_outage(own_postgres, tmp_path):
    settings = Settings(data_dir=tmp_path, database_url=own_postgres.new_database(),
                        log_json=False, cycle_interval_s=0.2, leader_poll_s=0.2)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
        before = submit(admin, "gpu=1", "algo")
        wait_for("placed", lambda: ok(admin.get(f"/api/v1/jobs/{before['id']}"))["allocation"])
        own_postgres.halt()
        time.sleep(5)
        away = admin.get("/healthz")
        own_postgres.resume()
        after = wait_for("a submission again", lambda: _submitted(admin), 30)
        placed = wait_for(
            "placed after the outage",
            lambda: ok(admin.get(f"/api/v1/jobs/{after['id']}"))["allocation"],
            30,
        )
        thread_alive = srv.ctx.loop._thread is not None and srv.ctx.loop._thread.is_alive()
    assert placed["nodes"][0]["node"] == "n0"
    assert thread_alive
    assert away.status_code == 503 and away.text.startswith("degraded: database unreachable")


def test_healthz_says_when_no_scheduler_leads(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, health_no_leader_s=1.5,
                        cycle_interval_s=0.2)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        client = srv.client()
        time.sleep(2)  # past the start's grace: the leader's proof of life is what counts
        leading = wait_for("ok", lambda: (r := client.get("/healthz")).status_code == 200 and r, 10)
        srv.ctx.loop.stop()  # as a scheduler thread that died, or a leader gone everywhere
        nobody = wait_for("degraded", lambda: (r := client.get("/healthz")).status_code == 503
                          and r, 10)  # fmt: skip
    assert leading.text == "ok"
    assert re.fullmatch(
        r"degraded: no scheduler has led for \d+ s \(last leader: .+\)", nobody.text
    ), nobody.text


def _submitted(admin) -> dict | None:
    body = {"tenant": "algo", "request": "gpu=1", "command": ["true"], "idempotency_key": "k"}
    answer = admin.post("/api/v1/jobs", json=body)
    return answer.json() if answer.status_code in (200, 201) else None


def test_a_broken_duty_stops_neither_scheduling_nor_the_others(tmp_path):
    """Alerts failing (their table renamed away: a half-applied upgrade, a bad restore) is
    counted and shown while jobs are still placed; once it mends, alerts run again."""
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        alert_interval_s=0.2)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
        with srv.ctx.db.write() as s:
            s.execute(text("ALTER TABLE alerts RENAME TO alerts_away"))
        failing = wait_for(
            "alerts failing", lambda: (d := _duty(admin, "alerts"))["failures"] >= 2 and d
        )
        job = submit(admin, "gpu=1", "algo")
        wait_for("placed", lambda: ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"])
        assert _duty(admin, "scheduling")["failures"] == 0
        assert ok(admin.get("/api/v1/status"))["last_cycle_error"] == ""
        with srv.ctx.db.write() as s:
            s.execute(text("ALTER TABLE alerts_away RENAME TO alerts"))
        wait_for("alerts again", lambda: _duty(admin, "alerts")["failures"] == 0, 30)
        scraped = admin.get("/metrics").text
        member = srv.client(srv.token("mo", "member", "algo"))
        hidden = "duties" not in ok(member.get("/api/v1/status"))
    assert "no such table: alerts" in str(failing["last_error"])
    assert re.search(r'gpupool_duty_failures_total\{duty="alerts"\} [2-9]', scraped), scraped
    assert 'gpupool_duty_last_success_timestamp_seconds{duty="scheduling"}' in scraped
    assert hidden  # errors may name tables and queries: for admins only


def test_healthz_turns_503_while_the_leaders_cycles_fail_and_ok_when_they_mend(tmp_path):
    """A leader that holds the lock but cannot schedule is no leader to /healthz."""
    settings = Settings(data_dir=tmp_path, log_json=False, health_no_leader_s=1.5,
                        cycle_interval_s=0.2)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        client, loop = srv.client(), srv.ctx.loop
        time.sleep(2)  # past the start's grace
        wait_for("ok", lambda: client.get("/healthz").status_code == 200, 10)

        def broken(now: float | None = None) -> None:
            raise RuntimeError("a bug in the cycle")

        mended = loop.run_once
        loop.run_once = broken  # type: ignore[method-assign]
        failing = wait_for("degraded", lambda: (r := client.get("/healthz")).status_code == 503
                           and r, 10)  # fmt: skip
        said = ok(srv.admin().get("/api/v1/status"))
        loop.run_once = mended  # type: ignore[method-assign]
        wait_for("ok again", lambda: client.get("/healthz").status_code == 200, 20)
        alive = loop._thread is not None and loop._thread.is_alive()
    assert failing.text.startswith("degraded: no scheduler has led for")
    assert said["leader"] and said["last_cycle_error"] == "RuntimeError: a bug in the cycle"
    assert said["duties"]["scheduling"]["failures"] >= 1 and alive


def _duty(admin, name: str) -> dict:
    return ok(admin.get("/api/v1/status"))["duties"][name]
