"""Attacks on interactive sessions' terminals (docs/interactive.md, docs/security.md "The
standing attack suite"), with a real server on a socket, a real agent and real processes:

- another tenant's member, a viewer or finance user of the session's own tenant, an agent's
  token, no token and a job id that does not exist: refused before the upgrade (403 alike,
  nothing opened, nothing said of the job); an admin opens it, and the audit log names the
  admin and the tenant;
- a forged agent link — the tunnel WebSocket of the node with a member's token, an admin's,
  another node's agent's, or the right agent's for a batch job: refused (403 / 409), and the
  session's real link stays up;
- garbage from a person (a first message that is not JSON, a binary first message, control
  frames with bad sizes and signals, a command of 10,000 arguments, an input frame past the
  window) and from the server's side into the agent's link (frames that are not the relay's):
  each answered or dropped; the server, the agent and the session serve a new terminal after.
"""

import json
import time

import pytest
from sqlalchemy import select
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gpupool.client import ClientError
from gpupool.model.relay import WINDOW, data_frame
from gpupool.server.db.tables import AuditRow
from tests.support.agents import (
    agent_thread,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.sessions import Term, running_session, shell
from tests.support.tenants import alpha_and_beta


@pytest.fixture
def pool(tmp_path):
    from gpupool.server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        alpha_and_beta(srv.admin(), 1)
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "agent")  # fmt: skip
        with agent_thread(agent):
            wait_for_cards(srv.admin())
            yield srv, agent


def _refused(srv, token: str, job_id: int) -> int:
    with pytest.raises(ClientError) as caught:
        Term(srv.url, token, job_id, command=["id"])
    return caught.value.status or 0


def _still_serves(srv, token: str, job_id: int) -> None:
    term = shell(srv.url, token, job_id)
    term.type("echo alive-$GPUPOOL_JOB_ID; exit 0\n")
    term.read_until(rf"alive-{job_id}")
    assert term.wait_exit() == 0


def test_only_the_sessions_tenant_and_admins_open_its_terminal(pool):
    srv, _ = pool
    admin = srv.admin()
    job = running_session(admin, "alpha")
    others = (("bob", "member", "beta"), ("vic", "viewer", "alpha"),
              ("fin", "finance", "alpha"), ("boss", "tenant-admin", "beta"))  # fmt: skip
    for who, role, tenant in others:
        assert _refused(srv, srv.token(who, role, tenant), job["id"]) == 403, who
    assert _refused(srv, srv.token("agent-x", "agent", node="n1"), job["id"]) == 403
    assert _refused(srv, "gp_not-a-token", job["id"]) == 401
    # a job that does not exist reads as one of another tenant: no oracle of ids
    bob = srv.token("bob2", "member", "beta")
    with pytest.raises(ClientError) as absent:
        Term(srv.url, bob, 999_999, command=["id"])
    with pytest.raises(ClientError) as theirs:
        Term(srv.url, bob, job["id"], command=["id"])
    assert absent.value.status == theirs.value.status == 403
    assert str(absent.value).replace("999999", "N") == str(theirs.value).replace(
        str(job["id"]), "N"
    )

    term = Term(srv.url, srv.admin_token, job["id"], command=["sh", "-c", "echo by-admin"])
    term.read_until("by-admin")
    assert term.wait_exit() == 0
    with srv.ctx.db.read() as s:
        opened = [(a.actor, a.role, a.target, a.detail) for a in s.execute(select(AuditRow).where(
            AuditRow.action == "WS /api/v1/jobs/{job_id}/terminal")).scalars()]  # fmt: skip
    assert ("root", "admin") in {o[:2] for o in opened}, opened
    mine = [o for o in opened if o[0] == "root"]
    assert "tenant alpha" in mine[0][2] and mine[0][3].startswith("admin root"), mine
    # and the API an admin reads it through says so (its detail was stored, not served)
    log = ok(srv.admin().get("/api/v1/audit", params={"action": "/terminal"}))["items"]
    assert any(e["actor"] == "root" and e["detail"].startswith("admin root") for e in log), log
    _still_serves(srv, srv.token("ann", "member", "alpha"), job["id"])


def _tunnel_status(srv, node: str, alloc_id: int, token: str) -> int:
    url = "ws" + srv.url.removeprefix("http") + f"/api/v1/nodes/{node}/tunnels/{alloc_id}"
    try:
        with connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                     open_timeout=10):  # fmt: skip
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def test_a_forged_agent_link_is_refused_and_the_real_one_stays(pool):
    srv, agent = pool
    admin = srv.admin()
    job = running_session(admin, "alpha")
    alloc = job["allocation"]["id"]
    batch = submit(admin, "gpu=1", "beta", command=["sleep", "60"])
    batch = wait_for("running", lambda: ok(admin.get(f"/api/v1/jobs/{batch['id']}"))
                     if ok(admin.get(f"/api/v1/jobs/{batch['id']}"))["state"] == "running"
                     else None, 30)  # fmt: skip
    assert isinstance(batch, dict)
    for token in (srv.token("ann", "member", "alpha"), srv.admin_token,
                  srv.token("agent-n2", "agent", node="n2")):  # fmt: skip
        assert _tunnel_status(srv, "n1", alloc, token) == 403
    n1 = srv.token("agent-n1b", "agent", node="n1")
    assert _tunnel_status(srv, "n1", batch["allocation"]["id"], n1) == 409  # no session
    assert _tunnel_status(srv, "n1", 987_654, n1) == 409
    link = agent.sessions.links[alloc]
    assert link.up.is_set()
    _still_serves(srv, srv.token("ann", "member", "alpha"), job["id"])


def _raw(srv, token: str, job_id: int):
    url = "ws" + srv.url.removeprefix("http") + f"/api/v1/jobs/{job_id}/terminal"
    return connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                   open_timeout=10, max_size=2**22)  # fmt: skip


def _answer(ws) -> dict:
    """The server's last text frame before it closes (an error, or the terminal opening)."""
    last: dict = {}
    try:
        while True:
            message = ws.recv(timeout=10)
            if isinstance(message, str):
                last = json.loads(message)
                if last.get("t") in ("error", "closed", "exit"):
                    return last
    except Exception:
        return last


def test_garbage_frames_from_a_person_or_into_the_link_harm_nothing(pool):
    srv, agent = pool
    job = running_session(srv.admin(), "alpha")
    ann = srv.token("ann", "member", "alpha")
    bad_opens: list[str | bytes] = [
        "not json",
        b"\x00binary first",
        json.dumps([1, 2]),
        json.dumps({"t": "open", "command": ["x"] * 10_000}),
        json.dumps({"t": "open", "cols": -1}),
        json.dumps({"t": "open", "term": "x\nterm"}),
        json.dumps({"t": "open", "command": ["a\0b"]}),
        json.dumps({"t": "open", "attach": 12345}),
        "x" * 200_000,
    ]
    for first in bad_opens:
        with _raw(srv, ann, job["id"]) as ws:
            ws.send(first)
            answer = _answer(ws)
            assert answer.get("t") == "error", (str(first)[:50], answer)

    for after in (
        json.dumps({"t": "resize", "cols": 0, "rows": 10**9}),
        json.dumps({"t": "signal", "sig": "STOP"}),
        json.dumps({"t": "ack", "n": 10**12}),
        b"\x00" + b"y" * (WINDOW + 10),
    ):
        with _raw(srv, ann, job["id"]) as ws:
            ws.send(json.dumps({"t": "open", "command": ["sleep", "30"], "pty": True}))
            assert json.loads(ws.recv(timeout=10))["t"] == "opened"
            ws.send(after)
            if isinstance(after, str) and '"ack"' in after:
                continue  # ignored: a person's ack is no credit of the node's
            assert _answer(ws).get("t") == "error", str(after)[:50]

    link = agent.sessions.links[job["allocation"]["id"]]
    for junk in (
        "not json",
        json.dumps([1]),
        json.dumps({"t": "open", "s": "x"}),
        json.dumps({"t": "open", "s": 7, "command": "rm -rf /"}),
        json.dumps({"t": "open", "s": 8, "kind": "tcp"}),
        json.dumps({"t": "ack", "s": 9, "n": -5}),
        json.dumps({"t": "signal", "s": 9, "sig": 9}),
        b"\x00",
        data_frame(12345, 0, b"z" * (WINDOW + 1)),
    ):
        link._post("msg", junk)
    wait_for("the junk served", lambda: not link._inbox, 10)
    assert not link.done and link.up.is_set()
    assert srv.admin().get("/api/v1/jobs").is_success
    _still_serves(srv, ann, job["id"])


def test_floods_of_opens_and_controls_are_paced_and_an_open_too_big_for_the_link_drops_nothing(
    pool,
):
    """Round 5 of the hostile review: opens cost the node a process start before the job's
    cgroup holds it (~0.1 s of CPU each, 150 in 10 s), control frames carry no credit (a
    resize flood slowed another tenant's open from 0.3 s to 6–8 s), and an open of non-ASCII
    arguments grew past the link's bound once encoded and dropped the link under every
    terminal of the session."""
    from gpupool.server.ratelimit import Pace

    srv, _ = pool
    job = running_session(srv.admin(), "alpha")
    ann = srv.token("ann", "member", "alpha")
    bystander = shell(srv.url, ann, job["id"])
    # a link too big once encoded for the node: refused to its sender, the link stays up
    wide = ["echo", *(["é" * 4000] * 4), "é" * 361]
    with _raw(srv, ann, job["id"]) as ws:
        ws.send(json.dumps({"t": "open", "command": wide}, ensure_ascii=False))
        answer = _answer(ws)
    assert answer.get("t") == "error" and "too long once encoded" in answer["detail"], answer
    bystander.type("echo still-$((40+2))\n")
    bystander.read_until("still-42")
    # control frames are paced (20 a second past a burst of 40): 100 resizes then a line,
    # served in order, take at least 3 s to reach the shell
    started = time.monotonic()
    for i in range(100):
        bystander.control(t="resize", cols=80 + i % 2, rows=24)
    bystander.type("echo after-$((1+1))\n")
    bystander.read_until("after-2", timeout=60)
    assert time.monotonic() - started >= 2.9
    bystander.type("exit 0\n")
    assert bystander.wait_exit() == 0
    # opens are paced per user: past the bucket a 429, another user opens at once
    srv.ctx.terminal_opens = Pace(rate=0.01, burst=3)
    for _ in range(3):
        with _raw(srv, ann, job["id"]) as ws:
            ws.send(json.dumps({"t": "open", "command": ["true"]}))
            assert json.loads(ws.recv(timeout=10))["t"] == "opened"
    assert _refused(srv, ann, job["id"]) == 429
    _still_serves(srv, srv.token("amy", "member", "alpha"), job["id"])
