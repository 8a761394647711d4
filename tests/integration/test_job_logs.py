"""A job's output reaches the server whole: every byte kept (NUL and invalid UTF-8 as visible
escapes — a NUL used to wedge the node's agent on PostgreSQL), past 64 KiB (only the first
64 KiB of a job's output used to be kept once it ended), up to the agent's per-job limit,
after which the log says so and the output files stop growing. A log the server refuses
never keeps the agent from reporting how its jobs ended."""

import sys

import pytest

from gpupool.agent.log_upload import log_text, utf8_cut
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server

PY = sys.executable


def _live(tmp_path, database_url=""):
    settings = Settings(
        data_dir=tmp_path, database_url=database_url, log_json=False, cycle_interval_s=0.2
    )
    return live_server(settings, run_scheduler=True)


def _tenant(srv):
    admin = srv.admin()
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 2}))
    return admin


def _log(admin, job_id: int, stream: str = "stdout") -> str:
    out, after = [], 0
    while True:
        page = admin.get(f"/api/v1/jobs/{job_id}/logs", params={"after": after}).json()
        if not page["chunks"]:
            return "".join(out)
        out += [c["text"] for c in page["chunks"] if c["stream"] == stream]
        after = page["chunks"][-1]["id"]


# 312 KB of numbered lines with a NUL, a byte that is not UTF-8 and a 3-byte character that
# lands across the agent's 64 KiB chunk boundaries somewhere
PRINT = (
    "import sys\n"
    "out = sys.stdout.buffer\n"
    "out.write(b'a\\x00b \\xff end\\n')\n"
    "for i in range(6000): out.write(('line %05d \\u4e2d' % i).encode() + b'x' * 38 + b'\\n')\n"
)


def test_every_byte_of_a_long_log_is_kept_on_both_databases(database_url, tmp_path):
    with _live(tmp_path, database_url) as srv:
        admin = _tenant(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        with agent_thread(make_agent(srv.url, token, "n1", tmp_path / "a")):
            wait_for_cards(admin)
            job = submit(admin, "gpu=1", "algo", command=[PY, "-c", PRINT])
            done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 30)
            assert done["state"] == "succeeded", done["reason"]
            after = submit(admin, "gpu=1", "algo", command=[PY, "-c", "print('next')"])
            nxt = wait_for("next job", in_state(admin, after["id"], "succeeded", "failed"), 30)
            assert nxt["state"] == "succeeded"  # the agent is not wedged
        text = _log(admin, job["id"])
    lines = text.split("\n")
    assert lines[0] == "a\\x00b \\xff end"
    body = [f"line {i:05d} \u4e2d" + "x" * 38 for i in range(6000)]
    assert lines[1:] == [*body, ""]
    assert len(text.encode()) > 300_000


def test_a_log_past_the_limit_says_so_and_stops_growing_on_disk(tmp_path):
    spam = (
        "import sys, time\n"
        "for i in range(40): sys.stdout.write('y' * 100_000 + '\\n'); sys.stdout.flush()\n"
        "time.sleep(300)\n"
    )
    with _live(tmp_path) as srv:
        admin = _tenant(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", log_max_bytes=250_000)
        with agent_thread(agent):
            wait_for_cards(admin)
            job = submit(admin, "gpu=1", "algo", command=[PY, "-c", spam])
            wait_for("running", in_state(admin, job["id"], "running"))
            wait_for("truncated", lambda: "limit of 250000 bytes" in _log(admin, job["id"]))
            (rec,) = agent.records.values()
            out = agent.store.dir(rec.alloc_id) / "stdout"
            # 4 MB printed; what stays on disk is emptied each round once past the limit
            wait_for("emptied", lambda: rec.offsets["stdout"] == 0 and out.stat().st_size < 1e6)
            ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
            wait_for("cancelled", in_state(admin, job["id"], "cancelled"))
        text = _log(admin, job["id"])
    kept, notice = text.split("\n[gpupool:", 1)
    assert len(kept.encode()) == 250_000 and set(kept) <= {"y", "\n"}
    assert "limit of 250000 bytes; its further output was not kept" in notice


def test_a_refused_log_upload_never_stops_the_end_being_reported(tmp_path):
    with _live(tmp_path) as srv:
        admin = _tenant(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a")

        def refuse(*_args) -> None:
            raise RuntimeError("500 from the server")

        agent.api.logs = refuse  # type: ignore[method-assign]
        with agent_thread(agent):
            wait_for_cards(admin)
            job = submit(admin, "gpu=1", "algo", command=[PY, "-c", "print('x' * 10)"])
            done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 30)
        assert done["state"] == "succeeded"


@pytest.mark.parametrize(
    ("data", "cut"),
    [(b"abc", 3), ("中".encode()[:2], 0), (b"x" + "中".encode()[:1], 1), ("a中".encode(), 4),
     ("é".encode(), 2), (b"ab" + "😀".encode()[:3], 2), (b"\xff\xfe", 2)],
)  # fmt: skip
def test_chunks_end_on_a_character_boundary(data, cut):
    assert utf8_cut(data) == cut


def test_log_text_keeps_every_byte_visible():
    assert log_text(b"a\x00b\xff\xc3") == "a\\x00b\\xff\\xc3"
    assert log_text("中".encode()) == "中"
