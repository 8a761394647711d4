"""An interactive session's idle clock from its agent's telemetry (``server.idle``), through
the real heartbeat route: a card of the session busy, or its memory in use moving, stamps the
session active (``gpupool sessions`` shows it); a quiet card does not, nor a busy card of a
batch job; a session naming no class is dev-test; and the monthly idle report counts the
card-hours sessions held idle apart."""

import time
from datetime import UTC, datetime

from sqlalchemy import select

from gpupool.server.db.tables import DeviceRow, NodeRow
from tests.support.cluster import ok, seed_cluster


def _started(server, admin, job: dict) -> list[int]:
    """The job's workload reported started; the devices it holds."""
    alloc = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    ok(agent.post(f"/api/v1/allocations/{alloc['id']}/status",
                  json={"generation": alloc["generation"], "state": "running"}))  # fmt: skip
    return [d["device"] for n in alloc["nodes"] for d in n["devices"]]


def _beat(server, cards: dict[int, tuple[float, int]], ago: float = 30) -> None:
    """A telemetry heartbeat of n0 (util, memory MiB per card), the previous ``ago`` s back."""
    with server.ctx.db.write() as s:
        s.get(NodeRow, "n0").heartbeat_at = time.time() - ago
        for d in s.execute(select(DeviceRow).where(DeviceRow.node == "n0")).scalars():
            d.telemetry = {**(d.telemetry or {}), "time": time.time() - ago}
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    devices = [{"index": i, "util_pct": u, "mem_used_mib": m} for i, (u, m) in cards.items()]
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": devices}))


def _active_at(admin, job_id: int) -> float | None:
    [session] = [s for s in ok(admin.get("/api/v1/sessions")) if s["job_id"] == job_id]
    return session["gpu_active_at"]


def test_a_sessions_cards_at_work_stamp_it_active_and_quiet_ones_do_not(sqlite_server):
    server = sqlite_server
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    body = {"request": "gpu=1", "tenant": "algo", "allocation": True, "max_runtime_s": 3600}
    session = ok(admin.post("/api/v1/jobs", json=body), 201)
    batch = ok(admin.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo",
                                                "command": ["x"]}), 201)  # fmt: skip
    server.cycle()
    [mine] = _started(server, admin, session)
    [theirs] = _started(server, admin, batch)
    quiet = {i: (0.0, 3) for i in range(4)}

    _beat(server, quiet)
    _beat(server, {**quiet, theirs: (95.0, 40_000)})  # a batch job's card at work: not ours
    assert _active_at(admin, session["id"]) is None
    before = time.time()
    _beat(server, {**quiet, mine: (80.0, 3)})
    stamped = _active_at(admin, session["id"])
    assert stamped is not None and stamped >= before
    _beat(server, quiet)  # quiet again: the stamp stays where the work was
    assert _active_at(admin, session["id"]) == stamped
    _beat(server, {**quiet, mine: (0.0, 2_000)})  # memory in use moved: activity too
    assert _active_at(admin, session["id"]) > stamped
    [listed] = ok(admin.get("/api/v1/sessions"))
    assert listed["idle_timeout_s"] == 0 and listed["policy_from"].startswith("the server's")
    # a session that names no class is dev work, below training; a kind or class named wins
    assert listed["priority_class"] == "dev-test"
    assert ok(admin.get(f"/api/v1/jobs/{batch['id']}"))["priority_class"] == "training"
    named = ok(admin.post("/api/v1/jobs", json={**body, "kind": "training"}), 201)
    assert named["priority_class"] == "training"

    month = datetime.now(UTC).strftime("%Y-%m")
    idle = ok(admin.get("/api/v1/billing/reports/idle", params={"month": month, "zone": "UTC"}))
    [row] = idle["items"]
    # the session's card was under 5% in four beats of 30 s — all but the one it worked in
    # (memory moving is activity for culling; the report counts utilisation alone)
    assert abs(row["interactive_idle_card_hours"] - 4 * 30 / 3600) < 0.002, row
    assert row["idle_card_hours"] > row["interactive_idle_card_hours"], row
