"""Idle culling of a shell session (docs/interactive.md, "Idle culling"), with a real server on
a socket running its leader loop, a real agent and real processes: a session nobody types into
whose card does no work is warned in its terminal, typing withdraws the warning, the next idle
stretch is warned again and the session released at the announced time — its job cancelled
with an ``idle-culled`` reason, its card granted to a job that waited for it, its metering
ended at the release.

The simulated cards show load while a workload holds them; the hardware edge is changed here
to show none, as a card under a shell that runs nothing on it reports."""

import time

import pytest

import gpupool.agent.agent as agent_module
from tests.support.agents import (
    in_state,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for,
)
from tests.support.cluster import ok
from tests.support.sessions import running_session, session_pool, shell

TIMEOUT_S, WARNING_S = 8, 4


@pytest.fixture
def pool(tmp_path, monkeypatch):
    from gpupool.server.settings import Settings

    real = agent_module.publish_load
    monkeypatch.setattr(agent_module, "publish_load", lambda loads, located: real([], located))
    settings = Settings(
        data_dir=tmp_path / "data",
        log_json=False,
        cycle_interval_s=0.2,
        session_idle_check_s=0.3,
        session_input_stamp_s=0.2,
    )
    with session_pool(settings, tmp_path / "agent") as pool:
        yield pool


def test_an_idle_shell_is_warned_then_released_and_its_card_goes_to_a_waiting_job(pool):
    srv, _ = pool
    admin = srv.admin()
    rule = {"timeout_s": TIMEOUT_S, "warning_s": WARNING_S}
    policy = ok(admin.put("/api/v1/tenants/alpha/idle-policy", json={"rules": {"*": rule}}))
    assert {r["timeout_s"] for r in policy["in_force"]} == {TIMEOUT_S}
    job = running_session(admin, "alpha", priority_class="dev-test")
    alloc_id = job["allocation"]["id"]
    member = srv.token("ann", "member", "alpha")
    term = shell(srv.url, member, job["id"])
    # a job that needs both cards waits for the session's (same class: no preemption)
    waiting = ok(admin.post("/api/v1/jobs", json={
        "request": "gpu=2", "tenant": "alpha", "command": ["sleep", "60"],
        "priority_class": "dev-test"}), 201)  # fmt: skip

    term.type("echo typed\n")
    term.read_until(r"\rtyped\r\n")
    typed_at = time.time()
    text = term.read_until(r"will be released", timeout=TIMEOUT_S + 15)
    warned_after = time.time() - typed_at
    assert warned_after >= TIMEOUT_S - WARNING_S - 0.5, warned_after
    assert "files are kept where the job was started from" in text, text[-600:]
    listed = ok(srv.client(member).get("/api/v1/sessions"))
    assert [s["job_id"] for s in listed] == [job["id"]]
    assert listed[0]["release_at"] is not None and listed[0]["idle_s"] >= 3, listed

    term.type("echo still-here\n")  # typing withdraws the warning
    term.read_until(r"idle warning withdrawn", timeout=10)
    assert ok(admin.get(f"/api/v1/jobs/{job['id']}"))["state"] == "running"
    assert ok(admin.get(f"/api/v1/jobs/{waiting['id']}"))["state"] == "pending"

    mark = len(term.text)
    term.read_until(r"(?s)\rstill-here.*will be released", timeout=TIMEOUT_S + 15)
    assert "will be released" in term.text[mark:]
    ended = term.read_until(r"this terminal ends now", timeout=WARNING_S + 15)
    assert "it had been warned as idle" in ended, ended[-600:]

    done = wait_for("the cull", in_state(admin, job["id"], "cancelled"), 20)
    assert done["reason"].startswith("idle-culled: no terminal input and no GPU activity")
    allocations = ok(admin.get("/api/v1/allocations", params={"tenant": "alpha"}))["items"]
    released = next(a for a in allocations if a["id"] == alloc_id)
    assert released["state"] == "released"
    assert released["release_reason"].startswith("idle-culled"), released

    # the card goes to the job that waited for it
    running = wait_for("the waiting job", in_state(admin, waiting["id"], "running"), 30)
    assert running["allocation"]["created_at"] >= released["released_at"]

    # metering ended at the release: records up to it, none after (checked again later)
    def records() -> list[dict]:
        items = ok(admin.get("/api/v1/usage", params={"tenant": "alpha"}))["items"]
        return [u for u in items if u["allocation_id"] == alloc_id]

    first = records()
    assert first and max(u["end"] for u in first) == released["released_at"], first
    time.sleep(1.5)
    assert records() == first
    assert ok(srv.client(member).get("/api/v1/sessions")) == []
