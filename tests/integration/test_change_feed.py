"""The change feed that wakes agents' long polls: a request waits on the state its own answer
was read from, so a feed that fell behind never leaves an agent asleep on a changed node
(the A-B-A that once kept a cancelled job's workload running for a whole wait), and a
request is not woken by changes on other nodes."""

import asyncio
import sys
import time

from gpupool.server.change_feed import ChangeFeed, node_digest, read_digests
from gpupool.server.node_orders import read_orders
from gpupool.server.settings import Settings
from tests.support.cluster import ok, submit
from tests.support.live import live_server

READY = node_digest([], "ready", [])
RUNNING = node_digest([(1, 1, "running")], "ready", [])


class World:
    """What the feed reads: a stamp that moves on every change and each node's digest."""

    def __init__(self) -> None:
        self.version = 0
        self.digests = {"n1": READY, "n2": READY}

    def set(self, node: str, digest: int) -> None:
        self.digests = {**self.digests, node: digest}
        self.version += 1


def _feed(world: World) -> ChangeFeed:
    feed = ChangeFeed(lambda: (world.version,), lambda: dict(world.digests), poll_s=3600)
    feed.start()  # its thread sleeps an hour: the tests call poll() themselves
    return feed


async def _waited(feed: ChangeFeed, digest: int, epoch: int, timeout_s: float, during) -> float:
    """Seconds a request on n1 waited, ``during`` being called while it waits; checks that
    the feed says "changed" exactly when it woke the request before its timeout."""
    started = time.monotonic()
    waiting = asyncio.create_task(feed.changed("n1", digest, epoch, timeout_s))
    await asyncio.sleep(0.05)
    during()
    changed = await waiting
    waited = time.monotonic() - started
    assert changed == (waited < timeout_s)
    return waited


def test_a_feed_that_fell_behind_still_wakes_the_request_after_an_a_b_a():
    world = World()
    feed = _feed(world)
    epoch = feed.epoch  # the feed still holds "ready" ...
    world.set("n1", RUNNING)  # ... while the answer is read with the job running
    try:

        def cancel_then_poll() -> None:
            world.set("n1", READY)  # cancelled: the node is as the feed last saw it
            feed.poll()

        waited = asyncio.run(_waited(feed, RUNNING, epoch, 5.0, cancel_then_poll))
        assert waited < 1.0, f"woken after {waited:.2f} s: the poll missed the change"
    finally:
        feed.stop()


def test_a_change_on_another_node_wakes_nobody_and_a_current_answer_waits():
    world = World()
    feed = _feed(world)
    try:

        def other_node() -> None:
            world.set("n2", RUNNING)
            feed.poll()

        waited = asyncio.run(_waited(feed, READY, feed.epoch, 0.5, other_node))
        assert waited >= 0.45  # it slept to its timeout
    finally:
        feed.stop()


def test_a_feed_newer_than_the_answer_sends_the_request_back_at_once():
    world = World()
    feed = _feed(world)
    epoch = feed.epoch
    world.set("n1", RUNNING)
    feed.poll()  # read after the answer's epoch, and different from the answer's state
    try:
        waited = asyncio.run(_waited(feed, READY, epoch, 5.0, lambda: None))
        assert waited < 1.0
    finally:
        feed.stop()


def test_a_feed_behind_the_answer_waits_for_its_next_read_instead_of_spinning():
    world = World()
    feed = _feed(world)
    world.set("n1", RUNNING)  # the feed has not read it yet; the answer has
    try:
        waited = asyncio.run(_waited(feed, RUNNING, feed.epoch, 0.5, lambda: None))
        assert waited >= 0.45
    finally:
        feed.stop()


def test_the_answer_and_the_feed_digest_a_node_alike(tmp_path):
    """Else every read of the feed would wake every waiting agent."""
    settings = Settings(data_dir=tmp_path, log_json=False)
    with live_server(settings) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))
        devices = [{"index": i, "model": "A100-80G", "memory_mib": 81920} for i in range(2)]
        node = {"name": "n1", "cpu_millis": 8000, "memory_mib": 65536, "devices": devices}
        ok(admin.post("/api/v1/nodes", json=node))
        idle = read_orders(srv.ctx, "n1")[1]
        assert idle == read_digests(srv.ctx.db)["n1"]
        submit(admin, "gpu=1", "algo", command=[sys.executable, "-c", "pass"])
        srv.cycle()
        answer, busy = read_orders(srv.ctx, "n1")
        assert len(answer.orders) == 1 and busy != idle
        assert busy == read_digests(srv.ctx.db)["n1"]


def test_an_idle_long_poll_reads_the_orders_once(tmp_path, monkeypatch):
    """A wait that runs out with no change answers with what it read on arrival: an idle
    node costs one read of its orders per wait, not two."""
    from gpupool.server import node_orders

    reads: list[str] = []
    real = node_orders.read_orders

    def counted(ctx, name):
        reads.append(name)
        return real(ctx, name)

    monkeypatch.setattr(node_orders, "read_orders", counted)
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        node = {"name": "n1", "cpu_millis": 8000, "memory_mib": 65536, "devices": []}
        ok(srv.admin().post("/api/v1/nodes", json=node))
        agent = srv.client(srv.token("agent-n1", "agent", node="n1"))
        etag = ok(agent.get("/api/v1/nodes/n1/orders"))["etag"]
        del reads[:]
        started = time.monotonic()
        same = ok(agent.get("/api/v1/nodes/n1/orders", params={"wait": 1.0, "known": etag}))
        assert time.monotonic() - started >= 0.9 and same["etag"] == etag
        assert reads == ["n1"]
