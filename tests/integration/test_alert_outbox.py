"""A webhook receiver that never answers delays nothing but its own alerts (issue 60): the
alerts' posts left the write transaction (an outbox read by a thread of the leader's own).
They were posted inside it, on the scheduler's thread: 50 alerts due to a receiver that
accepts and never answers held the writer for up to 100 s a pass — submissions, heartbeats
and cycles waited."""

import socket
import statistics
import threading
import time

from gpupool.server.db.tables import AlertRow
from gpupool.server.settings import Settings
from tests.support.cluster import node_body, ok, seed_cluster, submit
from tests.support.live import live_server


def _silent_receiver() -> tuple[socket.socket, list[socket.socket]]:
    """Accepts every connection and never answers a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return listener, held


def test_a_webhook_that_never_answers_delays_no_submission_heartbeat_or_cycle(
    tmp_path, monkeypatch
):
    monkeypatch.setattr("gpupool.server.loop.DELIVERY_BUDGET_S", 3.0, raising=False)
    listener, held = _silent_receiver()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        alert_interval_s=0.5, alert_webhook_url=url)  # fmt: skip
    try:
        with live_server(settings, run_scheduler=True) as srv:
            admin = srv.admin()
            seed_cluster(admin, nodes=1, tenants={"team": 4})
            now = time.time()
            with srv.ctx.db.write() as s:  # 50 changes due to a receiver that never answers
                for i in range(50):
                    s.add(AlertRow(key=f"k{i}", kind="node-lost", tenant=None, subject=f"n{i}",
                                   message="lost", state="firing", started_at=now))  # fmt: skip
            deadline = time.monotonic() + 20
            while not held and time.monotonic() < deadline:  # the posts are under way
                time.sleep(0.05)
            assert held, "no delivery was tried"
            agent = srv.client(srv.token("agent-n0", "agent", node="n0"))
            beat = node_body("n0", cards=4)["devices"]
            submits, beats, placed = [], [], []
            for _ in range(10):
                at = time.monotonic()
                job = submit(admin, "gpu=1", "team", command=["true"])
                submits.append(time.monotonic() - at)
                at = time.monotonic()
                ok(agent.post("/api/v1/nodes/n0/heartbeat",
                              json={"devices": [{"index": d["index"]} for d in beat]}))  # fmt: skip
                beats.append(time.monotonic() - at)
                at = time.monotonic()
                while ok(admin.get(f"/api/v1/jobs/{job['id']}"))["state"] == "pending":
                    assert time.monotonic() - at < 5, "the cycle did not place it"
                    time.sleep(0.02)
                placed.append(time.monotonic() - at)
                ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
            deadline = time.monotonic() + 30  # a pass ends within its budget (3 s here)
            tried = 0
            while not tried and time.monotonic() < deadline:
                with srv.ctx.db.read() as s:
                    tried = sum(1 for r in s.query(AlertRow) if r.attempts)
                time.sleep(0.2)
    finally:
        listener.close()
        for conn in held:
            conn.close()
    print(f"while the webhook hung: submit p50 {statistics.median(submits):.3f} s, max "
          f"{max(submits):.3f}; heartbeat max {max(beats):.3f}; "
          f"placed max {max(placed):.3f}")  # fmt: skip
    assert max(submits) < 1.0 and max(beats) < 1.0 and max(placed) < 1.0
    assert tried > 0  # the deliveries ran (and failed) meanwhile
