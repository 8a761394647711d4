"""The cluster and queue views' rules (sinfo / squeue words), and the commands on a live
server at 80 columns."""

import json
import os

from gpupool.cli import views
from tests.support.cli import gpupool
from tests.support.cluster import node_body, ok, submit


def _node(name, cards=4, state="ready", schedulable=True, cpu=64000, held=(), cpu_used=0):
    """A node as GET /api/v1/nodes gives it, with what live allocations hold there."""
    devices = [{"model": "A100-80G", "telemetry": {}} for _ in range(cards)]
    return {
        "name": name,
        "state": state,
        "schedulable": schedulable,
        "devices": devices,
        "cpu_millis": cpu,
        "memory_mib": 1024 * 1024,
        "devices_in_use": list(held),
        "cpu_allocated_millis": cpu_used,
        "mem_allocated_mib": 1024 if held or cpu_used else 0,
    }


def _alloc(node, devices, cpu=1000, mem=1024, exclusive=True, mig=None):
    grants = [
        {"device": d, "exclusive": exclusive, "compute_pct": 100 if exclusive else 30,
         "mig_profile": mig}
        for d in devices
    ]  # fmt: skip
    return {"nodes": [{"node": node, "cpu_millis": cpu, "mem_mib": mem, "devices": grants}]}


def test_node_states_follow_sinfo():
    nodes = [
        _node("idle"),
        _node("mixed", held=[0], cpu_used=1000),  # a share makes the card busy
        _node("full", held=[0, 1, 2, 3], cpu_used=1000),
        _node("drained", schedulable=False, held=[0], cpu_used=1000),
        _node("lost", state="lost"), _node("fenced", state="fenced"),
        _node("cpu", cards=0, cpu_used=64000),
    ]  # fmt: skip
    rows = {r["node"]: r for r in views.node_rows(nodes)}
    assert {n: r["state"] for n, r in rows.items()} == {
        "idle": "idle", "mixed": "mixed", "full": "allocated", "drained": "drained",
        "lost": "lost", "fenced": "fenced", "cpu": "allocated",
    }  # fmt: skip
    assert (rows["mixed"]["in_use"], rows["mixed"]["free"]) == (1, 3)
    assert rows["full"]["cpu_free"] == 63000
    groups = {(g["model"], g["state"]): g for g in views.summary(list(rows.values()))}
    assert groups[("A100-80G", "allocated")] == {
        "model": "A100-80G", "state": "allocated", "nodes": 1, "cards": 4, "in_use": 4, "free": 0,
    }  # fmt: skip
    assert groups[("(no gpu)", "allocated")]["nodes"] == 1


def test_queue_lines_and_placements():
    assert views.duration(59) == "0:59" and views.duration(3725) == "1:02:05"
    assert views.duration(2 * 86400 + 61) == "2-00:01:01"
    running = {
        "id": 7, "tenant": "a", "submitted_by": "ann", "name": "t", "state": "running",
        "started_at": 100.0, "submit_time": 90.0, "request": "gpu=3",
        "allocation": _alloc("n1", [0, 1, 3]) | {"id": 1},
    }  # fmt: skip
    pending = {
        "id": 9, "tenant": "a", "submitted_by": "bob", "name": "", "request": "gpu=8",
        "waited_s": 61.0, "reason": "quota: a gpu 4/4",
    }  # fmt: skip
    rows = views.queue_rows([pending], [running], now=160.0)
    assert [(r["id"], r["st"], r["time"], r["user"]) for r in rows] == [
        (9, "PD", "1:01", "bob"),
        (7, "R", "1:00", "ann"),
    ]
    assert rows[1]["where"] == "n1[0-1,3]"
    mig = {**running, "allocation": _alloc("n2", [2], exclusive=False, mig="1g.10gb")}
    assert views.queue_rows([], [mig], now=160.0)[0]["where"] == "n2[2](1g.10gb)"


def test_nodes_and_queue_commands_at_80_columns(sqlite_server):
    admin = sqlite_server.admin()
    for name in ("n0", "n1"):
        ok(admin.post("/api/v1/nodes", json=node_body(name, cards=4)))
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))
    running = submit(admin, "gpu=4", "algo")
    waiting = submit(admin, "gpu=4", "algo")  # borrows n1, or waits
    sqlite_server.cycle()
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token,
           "COLUMNS": "80"}  # fmt: skip
    nodes = gpupool("nodes", env=env)
    assert nodes.returncode == 0 and max(map(len, nodes.stdout.splitlines())) <= 80
    rows = json.loads(gpupool("nodes", "--json", env=env).stdout)
    states = sorted(r["state"] for r in rows)
    assert states in (["allocated", "allocated"], ["allocated", "idle"])
    queue = gpupool("queue", env=env)
    assert queue.returncode == 0, queue.stderr
    assert max(map(len, queue.stdout.splitlines())) <= 80
    listed = json.loads(gpupool("queue", "--json", env=env).stdout)
    by_id = {r["id"]: r for r in listed}
    assert by_id[running["id"]]["st"] in ("R", "CF")
    assert by_id[running["id"]]["where"].endswith("[0-3]")
    if waiting["id"] in by_id and by_id[waiting["id"]]["st"] == "PD":
        assert by_id[waiting["id"]]["where"]  # the reason it waits
    only = json.loads(gpupool("queue", "--state", "running", "--json", env=env).stdout)
    assert all(r["st"] != "PD" for r in only)
    bad = gpupool("queue", "--state", "done", env=env)
    assert bad.returncode == 2 and "not pending or running" in bad.stderr
    summary = gpupool("nodes", "--summary", "--json", env=env)
    assert sum(g["cards"] for g in json.loads(summary.stdout)) == 8


def test_a_member_sees_busy_cards_as_busy_without_seeing_whose(sqlite_server):
    """What a member may not see in detail (another team's jobs) still adds up: its node
    listing and summary count the other team's cards in use."""
    admin = sqlite_server.admin()
    for name in ("n0", "n1"):
        ok(admin.post("/api/v1/nodes", json=node_body(name, cards=4)))
    for name in ("algo", "beta"):
        ok(admin.post("/api/v1/tenants", json={"name": name}), 201)
        quota = {"resource": "gpu", "nominal": 4}
        ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json=quota))
    submit(admin, "gpu=3", "beta", name="beta-secret")
    submit(admin, "gpu=1", "algo")
    sqlite_server.cycle()
    member = sqlite_server.token("mo", "member", "algo")
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": member, "COLUMNS": "80"}
    summary = json.loads(gpupool("nodes", "--summary", "--json", env=env).stdout)
    assert sum(g["in_use"] for g in summary) == 4 and sum(g["free"] for g in summary) == 4
    rows = json.loads(gpupool("nodes", "--json", env=env).stdout)
    assert sum(r["in_use"] for r in rows) == 4
    listing = gpupool("nodes", env=env).stdout
    assert "beta" not in listing  # busy, not whose
    nodes = ok(sqlite_server.client(member).get("/api/v1/nodes"))["items"]
    assert sorted(i for n in nodes for i in n["devices_in_use"]) in ([0, 0, 1, 2], [0, 1, 2, 3])


def test_every_listing_fits_80_columns_with_realistic_data(sqlite_server):
    """Fractional and MIG jobs, a gang, long names, drained nodes and reasons: each table
    stays within 80 columns (queue with fractional jobs was 84 wide; footers wrapped)."""
    admin = sqlite_server.admin()
    ok(admin.put("/api/v1/pools/default", json={"name": "default", "sharing": "hybrid"}))
    for name in ("gpu-a100-node-01", "gpu-a100-node-02"):
        ok(admin.post("/api/v1/nodes", json=node_body(name, cards=4)))
    ok(admin.post("/api/v1/tenants", json={"name": "algorithm-research"}), 201)
    quota = {"resource": "gpu", "nominal": 6}
    ok(admin.put("/api/v1/tenants/algorithm-research/quotas/gpu", json=quota))
    team = "algorithm-research"
    for spec, extra in (
        ("gpu_share=0.25,gpu_mem=10GiB", {"name": "notebook-of-a-curious-researcher"}),
        ("gpu_share=0.5", {"name": "eval"}),
        ("gpu=A100-80G:2,cpu=16,mem=128GiB", {"name": "train-llama-70b-lora-rank-64"}),
        ("gpu=A100-80G:4", {"gang_size": 2, "name": "pretrain"}),
        ("gpu=1", {"max_runtime_s": 3600}),
    ):
        submit(admin, spec, team, **extra)
    sqlite_server.cycle()
    drain = {"reason": "fan failure reported by the datacentre on the morning shift"}
    ok(admin.post("/api/v1/nodes/gpu-a100-node-02/drain", json=drain))
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token,
           "COLUMNS": "80"}  # fmt: skip
    for args in (("queue",), ("nodes",), ("nodes", "-R"), ("nodes", "-s"), ("job", "list"),
                 ("acct", "--since", "now-1d"), ("usage",), ("tenants",)):  # fmt: skip
        out = gpupool(*args, env=env)
        assert out.returncode == 0, (args, out.stderr)
        wide = [line for line in out.stdout.splitlines() if len(line) > 80]
        assert not wide, (args, wide)
        if os.environ.get("GPUPOOL_SHOW_TABLES"):
            print(f"$ gpupool {' '.join(args)}\n{out.stdout}")
        rows = len(out.stdout.splitlines())
        assert rows <= {"job": 8, "nodes": 5}.get(args[0], 9), (args, out.stdout)  # no wrap
    long = gpupool("nodes", "-l", env=env).stdout  # -l widens instead of cutting names
    assert "gpu-a100-node-02" in long and "on the morning shift" in long
    assert len(long.splitlines()) == 4, long
