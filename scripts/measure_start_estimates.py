"""How long the leader's start-time plan takes and how many pending jobs it reaches within
its budget: N nodes of 8 cards full of time-limited jobs of three teams, P pending jobs
behind them (an in-process server on SQLite, cycles driven by hand).

    PYTHONPATH=src python scripts/measure_start_estimates.py NODES PENDING BUDGET_S
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tests/
from tests.support.cluster import node_body, ok, submit
from tests.support.live import live_server

from gpupool.server.settings import Settings


def main(nodes: int, pending: int, budget_s: float) -> None:
    settings = Settings(data_dir=tempfile.mkdtemp(), log_json=False, estimate_budget_s=budget_s)
    with live_server(settings) as srv:
        admin = srv.admin()
        for i in range(nodes):
            ok(admin.post("/api/v1/nodes", json=node_body(f"n{i}", cards=8)))
        for t in ("a", "b", "c"):
            ok(admin.post("/api/v1/tenants", json={"name": t}), 201)
            quota = {"resource": "gpu", "nominal": nodes * 8 / 3}
            ok(admin.put(f"/api/v1/tenants/{t}/quotas/gpu", json=quota))
        for i in range(nodes * 4):
            submit(admin, "gpu=2", "abc"[i % 3], max_runtime_s=600 + 60 * i)
        srv.cycle()
        for i in range(pending):
            request = f"gpu={(1, 2, 4)[i % 3]}"
            submit(admin, request, "abc"[i % 3], max_runtime_s=300 + 30 * (i % 50))
        srv.cycle()
        started = time.perf_counter()
        plan = srv.ctx.loop.estimate_starts(time.time())
        took = time.perf_counter() - started
    assert plan is not None
    timed = sum(e.start is not None for e in plan.estimates.values())
    print(f"nodes={nodes} cards={nodes * 8} pending={len(plan.estimates)} budget={budget_s:g} s: "
          f"{took:.2f} s (read, plan, write), {plan.steps} steps, {timed} with a time")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
