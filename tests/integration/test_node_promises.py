"""A node's memory, processes and disk are promised once (issue 42): every job's memory limit
— given, or the default of a job without ``mem=`` — is reserved by the scheduler where it
lands, so the limits on a node never add up to more than it offers (12 ``cpu=100m`` jobs
held 70.6 GiB of limits on a 23.5 GiB host); processes and disk follow each workload's
memory share; the kernel's OOM kills are named truthfully (a 350 MiB job killed under node
pressure was recorded as over its own grant); workloads are the OOM killer's first pick, the
agent and the server its last."""

import os
import time
from pathlib import Path

import pytest

from gpupool.agent.workloads import IsolationConfig, Launcher
from gpupool.model import Job, Node, SharingMode, parse_request
from gpupool.model.devices import Device, Vendor
from gpupool.scheduler import ClusterState, Placer
from gpupool.scheduler.types import Placement
from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_process,
    agent_thread,
    in_state,
    kill9,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, seed_cluster, submit
from tests.support.live import live_server

GIB = 1024


def _node(mem_mib: int = 24 * GIB, cards: int = 4, cpu: int = 2000, mode=SharingMode.WHOLE):
    devices = tuple(Device(i, "A100-80G", Vendor.NVIDIA, 81920, mode=mode) for i in range(cards))
    return Node("n1", cpu, mem_mib, devices)


def _place(state: ClusterState, spec: str, count: int) -> list[Placement | str]:
    placer = Placer("best-fit")
    out: list[Placement | str] = []
    for n in range(count):
        result = placer.place_and_apply(state, Job(id=f"{spec}-{n}", request=parse_request(spec)))
        out.append(result if isinstance(result, Placement) else result.reason)
    return out


def test_jobs_without_mem_reserve_their_share_and_never_more_than_the_node():
    state = ClusterState([_node(mem_mib=20_000)]).use_default_memory()
    tiny = _place(state, "cpu=100m", 25)
    placed = [p for p in tiny if isinstance(p, Placement)]
    held = sum(ng.mem_mib for p in placed for ng in p.nodes)
    # each its CPU's share of the node: 100m of 2,000m is 1,000 MiB of 20,000; 20 fit
    assert len(placed) == 20 and held == 20_000
    # (by CPU's share, memory runs out with the CPU: the node is charged to the first)
    assert [r for r in tiny if isinstance(r, str)] == ["0/1 nodes: 1 insufficient cpu"] * 5
    state = ClusterState([_node()]).use_default_memory()
    cards = _place(state, "gpu=1", 4)
    assert [p.nodes[0].mem_mib for p in cards if isinstance(p, Placement)] == [6 * GIB] * 4
    assert _place(state, "cpu=100m", 1) == ["0/1 nodes: 1 insufficient memory"]
    shared = _node(mode=SharingMode.SHARE)
    state = ClusterState([shared]).use_default_memory()  # a share: its compute's part
    (half,) = _place(state, "gpu_share=50%,gpu_mem=10GiB", 1)
    assert isinstance(half, Placement) and half.nodes[0].mem_mib == 3 * GIB
    explicit = ClusterState([_node()]).use_default_memory()
    (given,) = _place(explicit, "gpu=1,mem=1GiB", 1)
    assert isinstance(given, Placement) and given.nodes[0].mem_mib == GIB
    # the simulators' states keep the traces' own figures (nothing reserved by default)
    (sim,) = _place(ClusterState([_node()]), "gpu=1", 1)
    assert isinstance(sim, Placement) and sim.nodes[0].mem_mib == 0


def test_the_server_reserves_the_default_and_says_why_a_job_waits(tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
        jobs = [submit(admin, "gpu=1", "algo") for _ in range(4)]
        extra = submit(admin, "cpu=1", "algo")
        srv.cycle()
        held = [ok(admin.get(f"/api/v1/jobs/{j['id']}"))["allocation"] for j in jobs]
        waiting = ok(admin.get(f"/api/v1/jobs/{extra['id']}"))
        node = ok(admin.get("/api/v1/nodes/n0"))
    assert sum(a["nodes"][0]["mem_mib"] for a in held) == node["memory_mib"]
    assert waiting["state"] == "pending" and "insufficient memory" in waiting["reason"]


def test_process_and_disk_ceilings_are_memory_shares_of_the_nodes_budgets(tmp_path):
    config = IsolationConfig(mode="none", cgroups=False, pids_max=4096, disk_max_mib=100 * GIB)
    launcher = Launcher("n1", tmp_path, config, {}, None, node_memory_mib=24 * GIB)
    launcher.pid_budget, launcher.disk_budget = 29_491, 72 * GIB
    workloads = [launcher.shares(mem) for mem in [6 * GIB] * 4]
    assert sum(p for p, _ in workloads) <= launcher.pid_budget
    assert sum(d for _, d in workloads) <= launcher.disk_budget  # 100 GiB each before
    assert launcher.shares(24 * GIB) == (4096, 72 * GIB)
    assert launcher.shares(1) == (64, 256)  # floors


def _root_or_skip() -> None:
    if os.geteuid() != 0:
        if os.environ.get("GPUPOOL_REQUIRE_ROOT"):
            raise RuntimeError("this test needs root (CI runs it as root)")
        pytest.skip("needs root")


EAT = (
    "import time; x = bytearray({mib} * 1024 * 1024); "
    "[x.__setitem__(i, 1) for i in range(0, len(x), 4096)]; time.sleep(5)"
)


def test_an_oom_kill_names_its_cause_own_limit_or_node_pressure(tmp_path):
    _root_or_skip()
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 2}))
        token = srv.token("agent-n1", "agent", node="n1")
        isolation = IsolationConfig(mode="none", private_tmp=False)
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", isolation=isolation)
        if agent.launcher.cgroups.hierarchy.version is None:
            pytest.skip(f"no writable cgroups here: {agent.launcher.cgroups.hierarchy.note}")
        with agent_thread(agent):
            wait_for_cards(admin)
            own = submit(admin, "gpu=1,mem=200MiB", "algo",
                         command=["python3", "-c", EAT.format(mib=400)])  # fmt: skip
            own = wait_for("own", in_state(admin, own["id"], "failed", "succeeded"), 40)
            # something outside the promises (page cache, a leak) leaves the node short:
            # all of the agent's workloads together may now hold 300 MiB
            agent.launcher.cgroups.node_mem_mib = 300
            pressed = submit(admin, "gpu=1,mem=1GiB", "algo",
                             command=["python3", "-c", EAT.format(mib=500)])  # fmt: skip
            pressed = wait_for("pressed", in_state(admin, pressed["id"], "failed", "succeeded"), 40)
    assert own["reason"] == (
        "host memory: used more than its 200 MiB grant (killed by the OOM killer)"
    ), own["reason"]
    assert pressed["reason"] == (
        "host memory: killed by the OOM killer when the node ran short of memory, within its "
        "1024 MiB grant"
    ), pressed["reason"]


def test_workloads_are_the_oom_killers_first_pick_and_the_agent_its_last(tmp_path):
    _root_or_skip()
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 2}))
        token = srv.token("agent-n1", "agent", node="n1")
        (tmp_path / "a").mkdir()
        process = agent_process(srv.url, token, "n1", tmp_path / "a")
        try:
            wait_for_cards(admin)
            agent_score = Path(f"/proc/{process.pid}/oom_score_adj").read_text().strip()
            job = submit(admin, "gpu=1", "algo",
                         command=["sh", "-c", "cat /proc/self/oom_score_adj"])  # fmt: skip
            wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 30)
            time.sleep(0.5)
            logs = admin.get(f"/api/v1/jobs/{job['id']}/logs").json()["chunks"]
        finally:
            kill9(process)
    workload_score = "".join(c["text"] for c in logs).strip()
    assert workload_score == "500"  # raised by the workload itself: allowed everywhere
    # lowered where the agent may (CAP_SYS_RESOURCE; this sandbox's root lacks it)
    assert agent_score == ("-900" if _may_lower_oom_score() else "0")


def _may_lower_oom_score() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 24))  # CAP_SYS_RESOURCE
    return False
