"""The agents' channel (one WebSocket per agent, ``/api/v1/nodes/{name}/channel``): bare
beats keep a node and its lease alive without a request, telemetry rides on a beat now and
then, orders are pushed when they change; an agent whose server refuses the channel, or whose
channel drops, heartbeats and long-polls over HTTP."""

import json
import time

import pytest
from fastapi import FastAPI
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gpupool.agent.lease import read_lease
from gpupool.agent.telemetry_pace import TelemetryPace
from gpupool.server.db.tables import NodeRow
from gpupool.server.heartbeats import BeatBatcher
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    partitioned,
    wait_for,
)
from tests.support.cluster import ok, seed_cluster
from tests.support.live import live_server
from tests.support.process import alive

TICK = ["python3", "-c", "import time\nwhile True: time.sleep(0.1)"]


def _channel(srv, node: str, token: str):
    url = srv.url.replace("http://", "ws://") + f"/api/v1/nodes/{node}/channel"
    return connect(url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=5)


def _frame(ws) -> dict:
    return json.loads(ws.recv(timeout=10))


def _settings(tmp_path, **extra) -> Settings:
    return Settings(data_dir=tmp_path, log_json=False, **{"agent_beat_flush_s": 0.2, **extra})


def test_the_channel_answers_beats_once_recorded_and_refuses_bad_frames(tmp_path):
    with live_server(_settings(tmp_path)) as srv:
        seed_cluster(srv.admin(), nodes=2, tenants={"algo": 4})
        token = srv.token("agent-n0", "agent", node="n0")
        for node, bad in (("n0", "nope"), ("n1", token)):  # a bad token; another node's agent
            with pytest.raises(InvalidStatus) as refused:
                _channel(srv, node, bad)
            assert refused.value.response.status_code == 403
        with srv.ctx.db.write() as s:
            s.get(NodeRow, "n0").heartbeat_at = time.time() - 20
        with _channel(srv, "n0", token) as ws:
            first = _frame(ws)
            assert first["orders"]["node_state"] == "ready" and first["orders"]["orders"] == []
            ws.send(json.dumps({"beat": 1}))
            assert _frame(ws) == {"ok": 1, "state": "ready"}
            with srv.ctx.db.read() as s:
                assert time.time() - s.get(NodeRow, "n0").heartbeat_at < 5
            ws.send(json.dumps({"beat": 2, "devices": [{"index": 0, "util_pct": 12.0}]}))
            answer = _frame(ws)
            assert answer["ok"] == 2 and answer["node"]["lease_s"] == srv.ctx.settings.lease_s
            assert answer["node"]["state"] == "ready" and answer["node"]["heartbeat_s"] == 10.0
            node = ok(srv.admin().get("/api/v1/nodes/n0"))
            assert node["devices"][0]["telemetry"]["util_pct"] == 12.0
            for text, seq, detail in (
                ("garbage", None, "a frame must be"),
                (json.dumps({"beat": "3"}), None, "a frame must be"),
                (json.dumps({"beat": 4, "devices": [{"index": 9}]}), 4, "has no device 9"),
                (json.dumps({"beat": 5, "devices": [{"index": "x"}]}), 5, "devices.0.index"),
            ):
                ws.send(text)
                answer = _frame(ws)
                assert answer["refused"] == seq and detail in answer["detail"], answer
            ws.send(json.dumps({"beat": 6}))  # still open after all that
            assert _frame(ws) == {"ok": 6, "state": "ready"}


def test_a_lost_node_that_beats_again_is_fenced_and_told_its_orders(tmp_path):
    with live_server(_settings(tmp_path)) as srv:
        seed_cluster(srv.admin(), nodes=1, tenants={"algo": 4})
        token = srv.token("agent-n0", "agent", node="n0")
        with srv.ctx.db.write() as s:
            s.get(NodeRow, "n0").state = "lost"
        with _channel(srv, "n0", token) as ws:
            assert _frame(ws)["orders"]["node_state"] == "lost"
            ws.send(json.dumps({"beat": 1}))
            frames = [_frame(ws), _frame(ws)]  # the answer, and the orders that changed
            assert {"ok": 1, "state": "fenced"} in frames
            assert any(f.get("orders", {}).get("node_state") == "fenced" for f in frames)
        with srv.ctx.db.read() as s:
            assert s.get(NodeRow, "n0").state == "fenced"


def test_beats_wait_at_most_a_tenth_of_the_lease_to_be_written(tmp_path):
    assert Settings(data_dir=tmp_path).beat_flush_s == 1.0  # lease 20 s
    assert Settings(data_dir=tmp_path, heartbeat_timeout_s=2).beat_flush_s == pytest.approx(
        (2 - 2 / 3) / 10
    )


def test_beats_are_answered_only_after_they_are_written():
    """The lease is renewed from an answer: a beat the database never held is refused."""

    class Failing:
        async def run(self, fn, wake=True):
            raise RuntimeError("database away")

    import asyncio

    async def one() -> object:
        batcher = BeatBatcher(Failing(), 0.01, lambda: None, time.time)
        answered = asyncio.get_running_loop().create_future()
        batcher.add("n0", answered.set_result)
        return await asyncio.wait_for(answered, 5)

    outcome = asyncio.run(one())
    assert isinstance(outcome, RuntimeError) and "database away" in str(outcome)


def test_an_idle_agent_on_its_channel_keeps_its_lease_without_a_request(tmp_path):
    settings = _settings(tmp_path, heartbeat_timeout_s=3)  # advice 1 s, lease 2 s
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        agent = make_agent(
            srv.url, srv.token("agent-n1", "agent", node="n1"), "n1", tmp_path / "a",
            heartbeat_s=None,
        )  # fmt: skip
        calls: list[str] = []
        real = agent.api._call

        def counted(method, path, *args, **kwargs):
            calls.append(f"{method} {path}")
            return real(method, path, *args, **kwargs)

        agent.api._call = counted
        with agent_thread(agent):
            wait_for("channel", agent_channel_up(agent))
            time.sleep(1.0)
            calls.clear()
            beats = agent.channel.beats
            time.sleep(5.0)  # 2.5 leases
            assert calls == [] and agent.channel.beats - beats >= 4
            assert read_lease(agent.store.lease) > time.monotonic()
            node = ok(admin.get("/api/v1/nodes/n1"))
            assert node["state"] == "ready" and time.time() - node["heartbeat_at"] < 2.5


def _tenant_algo(admin) -> None:
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 2}))


def _running_job(admin) -> int:
    """Submit a one-card job for algo and wait until it runs."""
    body = {"request": "gpu=1", "tenant": "algo", "command": TICK}
    job = ok(admin.post("/api/v1/jobs", json=body), 201)["id"]
    wait_for("running", in_state(admin, job, "running"), 20)
    return job


def agent_channel_up(agent):
    return lambda: agent.channel is not None and agent.channel.up.is_set()


def test_orders_come_on_the_channel_and_a_cancel_stops_the_workload(tmp_path):
    with live_server(_settings(tmp_path, cycle_interval_s=0.2), run_scheduler=True) as srv:
        admin = srv.admin()
        _tenant_algo(admin)
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "a", heartbeat_s=None)  # fmt: skip
        asked: list[str] = []
        real = agent.api._call

        def counted(method, path, *args, **kwargs):
            if path.endswith("/orders"):
                asked.append(path)
            return real(method, path, *args, **kwargs)

        with agent_thread(agent):
            wait_for("channel", agent_channel_up(agent))
            time.sleep(1.5)  # a long poll sent before the channel was up ends at its change
            agent.api._call = counted
            job = _running_job(admin)
            (record,) = agent.records.values()
            ok(admin.post(f"/api/v1/jobs/{job}/cancel"))
            wait_for("stopped", lambda: not alive(record.pid), 10)
        assert asked == []  # the orders came on the channel


class _NoChannelRoute:
    """ASGI: what a server older than channels does with the upgrade — no route, so Starlette
    closes it before accepting (the client sees 403)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and scope["path"].endswith("/channel"):
            await send({"type": "websocket.close", "code": 1000})
            return
        await self.app(scope, receive, send)


def _older_server(app: FastAPI) -> None:
    app.add_middleware(_NoChannelRoute)


@pytest.mark.parametrize(
    ("extra", "prepare", "code"),
    [({"agent_channel": False}, None, "403"), ({}, _older_server, "403")],
    ids=["channels-off", "older-server"],
)
def test_a_newer_agent_whose_server_refuses_the_channel_heartbeats_over_http(
    tmp_path, extra, prepare, code
):
    settings = _settings(tmp_path, heartbeat_timeout_s=3, **extra)
    with live_server(settings, run_scheduler=True, prepare=prepare) as srv:
        admin = srv.admin()
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "a", heartbeat_s=None)  # fmt: skip
        with agent_thread(agent):
            wait_for("refused", lambda: agent.channel is not None and agent.channel.refused)
            time.sleep(4.0)  # longer than the timeout
            node = ok(admin.get("/api/v1/nodes/n1"))
        assert agent.channel.refused.startswith(code)
        assert node["state"] == "ready" and time.time() - node["heartbeat_at"] < 2.5


def test_an_older_agent_without_the_channel_runs_jobs_on_a_newer_server(tmp_path):
    with live_server(_settings(tmp_path, cycle_interval_s=0.2), run_scheduler=True) as srv:
        admin = srv.admin()
        _tenant_algo(admin)
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "a", channel=False)  # fmt: skip
        with agent_thread(agent):
            wait_for("registered", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            _running_job(admin)
        assert agent.channel is None


def test_an_agent_whose_channel_drops_heartbeats_over_http_at_once(tmp_path):
    settings = _settings(tmp_path, heartbeat_timeout_s=3)
    with live_server(settings, run_scheduler=True) as srv:
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "a", heartbeat_s=None)  # fmt: skip
        with agent_thread(agent):
            wait_for("channel", agent_channel_up(agent))
            http: list[float] = []
            real = agent.api.heartbeat

            def counted(devices):
                http.append(time.monotonic())
                return real(devices)

            agent.api.heartbeat = counted
            agent._next_heartbeat = time.monotonic() + 3600  # none over HTTP until told
            dropped = time.monotonic()
            agent.channel._ws.close()  # the server or the network dropped it
            wait_for("an HTTP heartbeat", lambda: http, 15)
            # at once (0.01-0.1 s here), else after the closing handshake (close_timeout 2 s)
            assert http[0] - dropped < 5.0
            wait_for("back", agent_channel_up(agent), 10)
        node = ok(srv.admin().get("/api/v1/nodes/n1"))
        assert node["state"] == "ready"


def test_telemetry_goes_when_what_the_scheduler_reads_changes_else_now_and_then():
    pace = TelemetryPace(busy_s=30, idle_s=60)
    cards = [{"index": 0, "healthy": True, "util_pct": 0.0}]
    assert pace.due(cards, busy=False, now=0.0)  # nothing sent yet
    pace.sent(cards, 0.0)
    assert not pace.due([{**cards[0], "util_pct": 55.0}], busy=False, now=10.0)
    assert pace.due([{**cards[0], "healthy": False}], busy=False, now=10.0)
    assert pace.due([{**cards[0], "mode": "mig"}], busy=False, now=10.0)
    assert not pace.due(cards, busy=False, now=59.0) and pace.due(cards, busy=False, now=60.0)
    assert pace.due(cards, busy=True, now=30.0)
    pace.forget()
    assert pace.due(cards, busy=False, now=31.0)


def test_a_partitioned_agent_on_its_channel_lets_its_lease_run_out(tmp_path):
    settings = _settings(tmp_path, heartbeat_timeout_s=3)
    with live_server(settings, run_scheduler=True) as srv:
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "a", heartbeat_s=None)  # fmt: skip
        with agent_thread(agent):
            wait_for("channel", agent_channel_up(agent))
            with partitioned(agent):
                time.sleep(0.5)
                deadline = read_lease(agent.store.lease)
                time.sleep(2.5)  # longer than a lease
                assert read_lease(agent.store.lease) == deadline < time.monotonic()


def test_a_silent_channel_is_closed_after_the_node_lost_timeout(tmp_path):
    """The server sends no pings: a socket that beats no more is closed by its route."""
    from websockets.exceptions import ConnectionClosed

    with live_server(_settings(tmp_path, heartbeat_timeout_s=1)) as srv:
        seed_cluster(srv.admin(), nodes=1, tenants={"algo": 4})
        with _channel(srv, "n0", srv.token("agent-n0", "agent", node="n0")) as ws:
            assert "orders" in _frame(ws)
            opened = time.monotonic()
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert 0.8 < time.monotonic() - opened < 5
            assert closed.value.rcvd.code == 1001


def test_bad_tokens_on_channel_upgrades_count_against_the_address(tmp_path):
    """The failed-authentication limiter counts upgrades too (one limiter for HTTP and
    channels); as on HTTP, a valid token still gets through."""
    with live_server(_settings(tmp_path, auth_failure_limit=3)) as srv:
        seed_cluster(srv.admin(), nodes=1, tenants={"algo": 4})
        for _ in range(3):
            with pytest.raises(InvalidStatus):
                _channel(srv, "n0", "gp_wrong")
        assert srv.client("gp_wrong").get("/api/v1/nodes").status_code == 429
        with _channel(srv, "n0", srv.token("agent-n0", "agent", node="n0")) as ws:
            assert "orders" in _frame(ws)


def test_beats_faster_than_flushes_are_answered_together_not_queued(tmp_path):
    """Each bare beat waits for the next flush; beats sent faster than that must not queue
    behind one another (answered one flush apart, a lease would fall further behind with
    every beat — agents beating every 0.3 s once let their leases run out)."""
    with live_server(_settings(tmp_path, agent_beat_flush_s=1.0)) as srv:
        seed_cluster(srv.admin(), nodes=1, tenants={"algo": 4})
        with _channel(srv, "n0", srv.token("agent-n0", "agent", node="n0")) as ws:
            assert "orders" in _frame(ws)
            started = time.monotonic()
            for seq in range(1, 9):
                ws.send(json.dumps({"beat": seq}))
                time.sleep(0.1)
            answers = {_frame(ws)["ok"] for _ in range(8)}
            assert answers == set(range(1, 9))
            assert time.monotonic() - started < 3.5  # one after another: 8 s and more


def test_telemetry_of_several_nodes_is_written_at_once_and_one_refused_spares_the_rest(
    database_url,
):
    from gpupool.bench.agent_swarm import NODE_BODY
    from gpupool.server.db.engine import Database
    from gpupool.server.db.tables import DeviceRow
    from gpupool.server.errors import ApiError
    from gpupool.server.group_commit import Batch
    from gpupool.server.heartbeats import record_beats
    from gpupool.server.node_registry import register_node
    from gpupool.server.schemas import NodeIn, Telemetry

    db = Database(database_url)
    db.migrate()
    with db.write() as s:
        for name in ("a", "b", "c", "d"):
            register_node(s, NodeIn(name=name, **NODE_BODY), time.time())
    cards = [Telemetry(index=i, util_pct=50.0, temp_c=40.0) for i in range(4)]
    sick = [Telemetry(index=0, healthy=False)]
    with db.write() as s:
        outcome, changed = record_beats(
            Batch(s),
            bare=["a", "b", "c", "d", "ghost"],
            telemetry={"a": cards, "b": [Telemetry(index=9)], "c": sick, "gone": cards},
            now=1000.0,
        )
    assert outcome["a"] == outcome["c"] == outcome["d"] == "ready" and outcome["ghost"] is None
    assert isinstance(outcome["b"], ApiError) and outcome["b"].status == 422
    assert "has no device 9" in outcome["b"].detail
    assert isinstance(outcome["gone"], ApiError) and outcome["gone"].status == 404
    assert changed  # c's card 0 is no longer healthy
    with db.read() as s:
        beats = {n.name: n.heartbeat_at for n in s.query(NodeRow)}
        devices = {(d.node, d.index): d for d in s.query(DeviceRow)}
    assert beats["a"] == beats["c"] == beats["d"] == 1000.0  # d: a bare beat
    assert beats["b"] != 1000.0  # refused whole, as an HTTP heartbeat with it would be
    assert devices[("a", 3)].telemetry["temp_c"] == 40.0
    assert devices[("a", 3)].telemetry["time"] == 1000.0
    assert not devices[("b", 0)].telemetry  # nothing of b written
    assert not devices[("c", 0)].healthy and devices[("c", 1)].healthy
    db.dispose()


def test_an_agent_that_reads_no_answers_is_not_read_further():
    """Backpressure: once MAX_IN_FLIGHT of its frames are unanswered on the socket (its
    answers cannot be written: it reads none), the channel stops reading the agent's frames,
    so a flood costs the server a bounded queue, not memory without end."""
    import asyncio
    from types import SimpleNamespace

    from gpupool.server.routes.agent_channel import MAX_IN_FLIGHT, _Channel

    class Stuck:
        """A socket that always has a frame to read and never takes a write."""

        def __init__(self) -> None:
            self.read = 0

        async def receive_text(self) -> str:
            self.read += 1
            await asyncio.sleep(0)
            return json.dumps({"beat": self.read})

        async def send_text(self, text: str) -> None:
            await asyncio.Event().wait()

    class Written:
        async def run(self, fn, wake=True):
            return {"n0": "ready"}, False

    async def flood() -> int:
        ws = Stuck()
        ctx = SimpleNamespace(beats=BeatBatcher(Written(), 0.01, lambda: None, time.time))
        chan = _Channel(ws, ctx, "n0")
        tasks = [asyncio.create_task(chan._read()), asyncio.create_task(chan._write())]
        await asyncio.sleep(0.5)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return ws.read

    assert asyncio.run(flood()) == MAX_IN_FLIGHT


def test_a_burst_of_beats_is_answered_once_each_in_order_and_a_bad_frame_refused(tmp_path):
    with live_server(_settings(tmp_path)) as srv:
        seed_cluster(srv.admin(), nodes=1, tenants={"algo": 4})
        with _channel(srv, "n0", srv.token("agent-n0", "agent", node="n0")) as ws:
            assert "orders" in _frame(ws)
            for seq in range(1, 41):
                ws.send(json.dumps({"beat": seq}) if seq != 20 else '{"beat": "x"}')
            answers = [_frame(ws) for _ in range(40)]
    refused = [a for a in answers if "refused" in a]
    assert refused == [
        {"refused": None, "detail": 'a frame must be {"beat": <int>[, "devices": [...]]}'}
    ]
    assert [a["ok"] for a in answers if "ok" in a] == [s for s in range(1, 41) if s != 20]
    assert {a["state"] for a in answers if "ok" in a} == {"ready"}


def test_a_refused_beat_is_sent_again_within_two_seconds_not_an_interval_later(
    tmp_path, monkeypatch
):
    """A beat the server could not record (its database away for a moment) is retried soon:
    retried only at the next interval (10 s), a 5.4 s PostgreSQL outage let a node's lease run
    out and killed its workloads (issue 44)."""
    from sqlalchemy.exc import OperationalError

    from gpupool.server import heartbeats

    failing = {"on": False}
    real = heartbeats.record_beats

    def flaky(*args, **kwargs):
        if failing["on"]:
            raise OperationalError("UPDATE nodes", {}, Exception("the database is away"))
        return real(*args, **kwargs)

    monkeypatch.setattr(heartbeats, "record_beats", flaky)
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", heartbeat_s=6.0)
        with agent_thread(agent):
            wait_for("the channel", lambda: agent.channel and agent.channel.up.is_set(), 20)
            sent: list[float] = []
            beat = agent.channel._beat

            def timed(devices=None):
                sent.append(time.monotonic())
                return beat(devices)

            monkeypatch.setattr(agent.channel, "_beat", timed)
            failing["on"] = True
            wait_for("a refused beat and its retry", lambda: len(sent) >= 2, 20)
            failing["on"] = False
            wait_for("a recorded beat again", lambda: len(sent) >= 3, 20)
    assert sent[1] - sent[0] < 4.0, sent  # 2 s after the refusal (its flush takes up to 1 s)


def test_simulated_cards_show_what_runs_on_them_within_a_beat_or_two(tmp_path):
    """Issue 59, finding 10: idle simulated cards showed 72% utilisation and 1,215 W — the
    telemetry of the job that had just left them, kept until the next paced send (60 s).
    A card taken or let go is news: the next beat carries it."""
    from tests.support.cluster import submit

    with live_server(_settings(tmp_path, cycle_interval_s=0.2), run_scheduler=True) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=0, tenants={"algo": 4})
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "a", heartbeat_s=0.5)  # fmt: skip
        agent.pace.busy_s, agent.pace.idle_s = 30.0, 60.0  # as deployed

        def utils() -> list[float]:
            node = ok(admin.get("/api/v1/nodes/n1"))
            return [d["telemetry"].get("util_pct", -1.0) for d in node["devices"]]

        with agent_thread(agent):
            wait_for("channel", agent_channel_up(agent))
            wait_for("idle telemetry", lambda: utils() == [0.0, 0.0], 10)
            job = submit(admin, "gpu=2", "algo", command=["sleep", "4"])
            wait_for("busy cards", lambda: all(u > 0 for u in utils()), 10)
            wait_for("the job's end", in_state(admin, job["id"], "succeeded"), 30)
            ended = time.monotonic()
            wait_for("idle cards again", lambda: utils() == [0.0, 0.0], 10)
            assert time.monotonic() - ended < 5  # not the paced 60 s
