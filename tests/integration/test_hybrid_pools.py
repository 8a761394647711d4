"""Hybrid pools decide per card between MIG and sharing from demand, within the admin's
bounds: the pure plan, the device backends' MIG mode switch (simulated, NVML and nvidia-smi
stand-ins with NVML's rules), the agent's part, and the whole loop with a real server and
agent: a share request waits, an idle MIG card becomes a shared card, the request runs, and
the pool's lower bound keeps the last MIG card."""

import time

import pytest

from gpupool.agent.card_modes import CardModes
from gpupool.devices.detect import Located
from gpupool.devices.nvidia_mig import MigError
from gpupool.devices.nvidia_nvml import NvmlBackend
from gpupool.devices.nvidia_smi import NvidiaSmiBackend, parse_query_xml
from gpupool.devices.simulated import simulated_backend
from gpupool.model import SharingMode, SpecError
from gpupool.scheduler.reasons import Reason, Wait
from gpupool.server.settings import Settings
from gpupool.sharing.hybrid import HybridBounds, HybridCard, plan_modes
from gpupool.sharing.runtime_env import LocalDevice
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
)
from tests.support.cli import gpupool
from tests.support.cluster import node_body, ok, pool_with_a_node, submit, team
from tests.support.fake_nvml import FakeNvml
from tests.support.fake_smi import FakeSmi
from tests.support.live import live_server
from tests.support.paths import A100_MIG_XML

MIG, SHARE = SharingMode.MIG, SharingMode.SHARE


def cards(*modes: SharingMode, busy=(), model="A100-80G") -> list[HybridCard]:
    return [
        HybridCard("n0", i, model, m, idle=i not in busy) for i, m in enumerate(modes)
    ]  # fmt: skip


def test_waiting_requests_switch_one_idle_card_within_the_bounds():
    # a share request waits: one idle MIG card becomes shared (the lowest first)
    (change,) = plan_modes(cards(MIG, MIG, MIG), HybridBounds(), 0, 3)
    assert (change.index, change.mode) == (0, SHARE) and "3 share or whole-card" in change.why
    # ... but never a busy one, and never below the lower bound
    (change,) = plan_modes(cards(MIG, MIG, MIG, busy={0}), HybridBounds(), 0, 1)
    assert change.index == 1
    assert plan_modes(cards(MIG, SHARE), HybridBounds(mig_min=1), 0, 5) == []
    # a MIG request waits: an idle shared card becomes a MIG card, up to the upper bound
    (change,) = plan_modes(cards(SHARE, SHARE), HybridBounds(), 2, 0)
    assert (change.index, change.mode) == (0, MIG)
    assert plan_modes(cards(MIG, SHARE), HybridBounds(mig_max=1), 2, 0) == []
    # demand on both sides: MIG first (isolated inference), one card a cycle
    assert len(plan_modes(cards(SHARE, SHARE, SHARE), HybridBounds(), 1, 1)) == 1
    # nothing waits: nothing moves
    assert plan_modes(cards(MIG, SHARE), HybridBounds(), 0, 0) == []


def test_the_bounds_are_kept_first_and_a_switch_in_flight_counts():
    changes = plan_modes(cards(MIG, MIG, MIG, MIG), HybridBounds(mig_max=1), 0, 0)
    assert [(c.index, c.mode) for c in changes] == [(0, SHARE), (1, SHARE), (2, SHARE)]
    ordered = [
        HybridCard("n0", 0, "A100-80G", MIG, True, want=SHARE),
        HybridCard("n0", 1, "A100-80G", MIG, True),
    ]
    assert plan_modes(ordered, HybridBounds(mig_max=1), 0, 0) == []  # already on its way
    # cards that cannot do MIG are left alone and do not count
    assert plan_modes(cards(SHARE, SHARE, model="T4"), HybridBounds(mig_min=1), 3, 0) == []
    with pytest.raises(SpecError, match="mig_cards_min 3 is above mig_cards_max 1"):
        HybridBounds(mig_min=3, mig_max=1)


def test_only_requests_that_wait_for_room_on_these_cards_count():
    from gpupool.model import Job, parse_request
    from gpupool.scheduler.cycle import CycleResult
    from gpupool.server.hybrid_modes import waiting_for_room

    jobs = {
        "share": "gpu_share=0.5", "t4": "gpu=T4:1", "mig": "mig=3g.40gb",
        "h200": "mig=3g.71gb", "quota": "gpu=1", "cpu": "cpu=4",
    }  # fmt: skip
    pending = [Job(k, parse_request(v)) for k, v in jobs.items()]
    result = CycleResult(
        pending={k: Reason(Wait.NO_ROOM, "0/2 nodes: 2 no free gpu") for k in jobs}
    )
    result.pending["quota"] = Reason(Wait.QUOTA, "quota: algo gpu 4/4 guaranteed")
    # the T4 request and the H200 profile cannot use A100s; quota and CPU waits do not count
    assert waiting_for_room(result, pending, {"A100-80G"}) == (1, 1)


def test_backends_switch_mig_mode_only_with_no_instance_left():
    sim = simulated_backend("simulated:1xA100-80G:mig", "n1")
    made = sim.create_mig(0, "3g.40gb", 4)
    with pytest.raises(SpecError, match=r"still has instances \(3g\.40gb@4\)"):
        sim.set_mig_mode(0, False)
    sim.destroy_mig(0, made.uuid)
    sim.set_mig_mode(0, False)
    assert sim.discover()[0].mode is SharingMode.WHOLE
    with pytest.raises(SpecError, match="cannot do MIG"):
        simulated_backend("simulated:1xT4", "n1").set_mig_mode(0, True)

    nvml = FakeNvml(parse_query_xml(A100_MIG_XML.read_text()))  # 4 x 1g.20gb on card 0
    for backend in (
        NvmlBackend(nvml),
        NvidiaSmiBackend(run=FakeSmi(nvml, A100_MIG_XML.read_text())),
    ):
        nvml.gpus[0].mig_on, nvml.gpus[0].migs = True, list(nvml.gpus[0].migs)
        saved = list(nvml.gpus[0].migs)
        with pytest.raises(MigError, match=r"cannot turn MIG off: .*In use by another client"):
            backend.set_mig_mode(0, False)
        nvml.gpus[0].migs = []
        backend.set_mig_mode(0, False)
        assert backend.discover()[0].mode is SharingMode.WHOLE
        nvml.needs_reset = True  # a driver that waits for a GPU reset: said, not pretended
        with pytest.raises(MigError, match="MIG on is pending a GPU reset"):
            backend.set_mig_mode(0, True)
        assert backend.discover()[0].mode is SharingMode.WHOLE
        nvml.needs_reset, nvml.gpus[0].migs = False, saved
        del nvml.gpus[0].pending_mode


def test_the_agent_switches_idle_cards_and_says_why_it_cannot():
    sim = simulated_backend("simulated:2xA100-80G:mig", "n1")
    sim.create_mig(0, "7g.80gb", 0)
    located = {d.local_index: Located(d.local_index, d, sim) for d in sim.discover()}
    local = {
        i: LocalDevice(loc.device.vendor, i, loc.device.uuid,
                       tuple((m.profile, m.start, m.uuid) for m in loc.device.mig))
        for i, loc in located.items()
    }  # fmt: skip
    modes = CardModes()
    assert modes.apply({0: "share", 1: "share"}, located, local, busy={1}) == ["device 0 -> share"]
    assert sim.discover()[0].mode is SharingMode.WHOLE and local[0].mig == ()  # 7g destroyed
    assert located[0].device.mode is SharingMode.WHOLE
    entry = {"index": 0}
    modes.report(entry)
    assert entry == {"index": 0, "mode": "share"}
    assert modes.apply({0: "share"}, located, local, set()) == []  # done already

    class NoSwitch:
        name = "tool"

    located[1] = Located(1, located[1].device, NoSwitch())
    assert modes.apply({1: "share"}, located, local, set()) == []
    entry = {"index": 1}
    modes.report(entry)
    assert entry["mode_error"] == "cannot switch to share: the tool backend cannot switch MIG mode"
    assert modes.apply({1: "share"}, located, local, set()) == []  # not tried every round


def test_pool_bounds_are_checked(sqlite_server):
    admin = sqlite_server.admin()
    r = admin.put("/api/v1/pools/p", json={"name": "p", "sharing": "share", "mig_cards_max": 2})
    assert r.status_code == 422 and "only a hybrid pool" in r.json()["detail"]
    body = {"name": "p", "sharing": "hybrid", "mig_cards_min": 3, "mig_cards_max": 1}
    r = admin.put("/api/v1/pools/p", json=body)
    assert r.status_code == 422 and "3 is above mig_cards_max 1" in r.json()["detail"]
    r = admin.put("/api/v1/pools/p", json={**body, "mig_cards_min": -1})
    assert r.status_code == 422
    out = ok(admin.put("/api/v1/pools/p", json={**body, "mig_cards_min": 1}))
    assert (out["mig_cards_min"], out["mig_cards_max"]) == (1, 1)
    # the same through the CLI, as an operator does it
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token,
           "COLUMNS": "80"}  # fmt: skip
    said = gpupool("pool", "set", "p", "--mig-max", "4", env=env)
    assert said.stdout.strip() == "pool p: hybrid, policy auto, MIG cards 1..4", said.stderr
    refused = gpupool("pool", "set", "p", "--mig-min", "5", env=env)
    assert refused.returncode == 2 and "5 is above mig_cards_max 4" in refused.stderr
    said = gpupool("pool", "set", "p", "--sharing", "share", env=env)  # bounds dropped with it
    assert said.stdout.strip() == "pool p: share, policy auto (0 card(s) shareable now)", (
        said.stderr
    )
    listed = gpupool("pool", "list", env=env)
    assert listed.returncode == 0 and max(map(len, listed.stdout.splitlines())) <= 80
    assert "share" in listed.stdout


def test_an_order_no_agent_carries_out_is_given_up_and_not_repeated_at_once(sqlite_server):
    """A node whose agent never switches (an older one, or none): after mode_switch_timeout_s
    the card takes work again as it is, and the pool does not order it again for a while."""
    srv, admin = sqlite_server, sqlite_server.admin()
    ok(admin.put("/api/v1/pools/hyb", json={"name": "hyb", "sharing": "hybrid"}))
    body = node_body("n1", cards=1, pool="hyb")
    body["devices"][0]["mode"] = "mig"
    ok(admin.post("/api/v1/nodes", json=body))
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    submit(admin, "gpu_share=0.5", "algo")
    t0 = time.time()
    srv.cycle(now=t0)
    (card,) = ok(admin.get("/api/v1/nodes/n1"))["devices"]
    assert (card["mode"], card["want_mode"]) == ("mig", "share")
    srv.cycle(now=t0 + 601)  # default timeout 600 s: given up, and not ordered again
    (card,) = ok(admin.get("/api/v1/nodes/n1"))["devices"]
    assert (card["mode"], card["want_mode"]) == ("mig", None)
    actions = [
        a["action"] for a in ok(admin.get("/api/v1/audit", params={"action": "MODE"}))["items"]
    ]
    assert sorted(actions) == ["MODE switch", "MODE switch timed out"]
    srv.cycle(now=t0 + 601 + 6 * 600 + 1)  # six timeouts later it may be asked again
    (card,) = ok(admin.get("/api/v1/nodes/n1"))["devices"]
    assert card["want_mode"] == "share"


def test_a_hybrid_pool_turns_an_idle_mig_card_into_a_shared_one_for_a_waiting_job(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        pool = {"name": "hyb", "sharing": "hybrid", "mig_cards_min": 1}
        ok(admin.put("/api/v1/pools/hyb", json=pool))
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(
            srv.url, token, "n1", tmp_path / "agent", devices="simulated:2xA100-80G:mig",
            pool="hyb",
        )  # fmt: skip
        cmd = ["python3", "-c", "import time; time.sleep(30)"]

        def modes() -> list[str]:
            return [d["mode"] for d in ok(admin.get("/api/v1/nodes/n1"))["devices"]]

        with agent_thread(agent):
            wait_for("registration", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            assert modes() == ["mig", "mig"]
            shared = submit(admin, "gpu_share=0.5", "algo", command=cmd)
            wait_for("share job running", in_state(admin, shared["id"], "running"), timeout=30)
            assert modes() == ["share", "mig"]
            audit = ok(admin.get("/api/v1/audit", params={"action": "MODE"}))["items"]
            assert [a["target"] for a in audit] == [
                "n1 device 0 -> share (pool hyb: 1 share or whole-card requests wait for room)"
            ]
            isolated = submit(admin, "mig=3g.40gb", "algo", command=cmd)
            wait_for("MIG job running", in_state(admin, isolated["id"], "running"), timeout=30)
            # a whole card waits, but the pool keeps its one MIG card (mig_cards_min 1)
            whole = submit(admin, "gpu=1", "algo", command=cmd)
            time.sleep(1.0)  # five cycles or so: none of them switches the last MIG card
            job = wait_for(
                "reason", lambda: ok(admin.get(f"/api/v1/jobs/{whole['id']}"))["reason"] or None
            )
            assert job.startswith("0/1 nodes")
            assert modes() == ["share", "mig"]
            assert len(ok(admin.get("/api/v1/audit", params={"action": "MODE"}))["items"]) == 1
            for j in (shared, isolated, whole):
                ok(admin.post(f"/api/v1/jobs/{j['id']}/cancel"))


def test_a_pool_set_to_share_shares_its_cards_at_once_and_its_mig_cards_once_idle(sqlite_server):
    """``pool set --sharing share`` used to succeed with no card shareable: now its whole
    cards are shared at once (a running whole-card job keeps its card until it ends) and its
    MIG cards are ordered out of MIG as soon as nothing runs on them."""
    srv = sqlite_server
    admin = srv.admin()
    pool_with_a_node(admin, "p", "whole", "n0", ["whole", "whole", "mig"])
    team(admin, "algo", 3)
    whole = submit(admin, "gpu=1", "algo")
    srv.cycle()
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token, "COLUMNS": "80"}
    said = gpupool("pool", "set", "p", "--sharing", "share", env=env)
    assert said.stdout.strip() == (
        "pool p: share, policy auto (2 card(s) shareable now; 1 MIG card(s) switch once idle)"
    ), said.stderr
    modes = [d["mode"] for d in ok(admin.get("/api/v1/nodes/n0"))["devices"]]
    assert modes == ["share", "share", "mig"]
    halves = [submit(admin, "gpu_share=0.5,gpu_mem=10GiB", "algo") for _ in range(2)]
    srv.cycle()
    placed = [ok(admin.get(f"/api/v1/jobs/{j['id']}"))["allocation"] for j in halves]
    cards = {(a["nodes"][0]["node"], a["nodes"][0]["devices"][0]["device"]) for a in placed}
    busy = ok(admin.get(f"/api/v1/jobs/{whole['id']}"))["allocation"]["nodes"][0]["devices"][0]
    assert len(cards) == 1 and busy["device"] not in {c[1] for c in cards}  # one card, shared
    with srv.ctx.db.read() as s:
        from gpupool.server.db.tables import DeviceRow

        mig = s.get(DeviceRow, ("n0", 2))
        assert mig.want_mode == "share"  # ordered out of MIG: nothing ran there


def test_a_pool_of_whole_cards_made_hybrid_can_share_and_cut_them(sqlite_server):
    """On the cluster gpupool up makes (whole A100s), ``pool set default --sharing hybrid``
    changed nothing: every card stayed whole, and ``--gpu-mem 10GiB`` was refused as "can
    never run ... no shared-mode gpu". Its MIG-capable cards now take sharers at once, and
    what can ever run there counts what the pool may switch them to."""
    srv = sqlite_server
    admin = srv.admin()
    pool_with_a_node(admin, "p", "whole", "n0", ["whole", "whole"])
    team(admin, "algo", 2)
    before = admin.post("/api/v1/jobs", json={"request": "gpu_mem=10GiB", "tenant": "algo"})
    assert before.status_code == 422 and "can never run" in before.text
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token, "COLUMNS": "80"}
    said = gpupool("pool", "set", "p", "--sharing", "hybrid", env=env)
    assert said.returncode == 0, said.stderr
    assert "2 card(s) shared now, 0 in MIG; the pool switches them" in said.stdout
    assert [d["mode"] for d in ok(admin.get("/api/v1/nodes/n0"))["devices"]] == ["share"] * 2
    small = submit(admin, "gpu_mem=10GiB", "algo")
    cut = submit(admin, "mig=1g.10gb", "algo")  # accepted: the pool may cut a card
    srv.cycle()
    assert ok(admin.get(f"/api/v1/jobs/{small['id']}"))["state"] == "admitted"
    assert ok(admin.get(f"/api/v1/jobs/{cut['id']}"))["state"] == "pending"  # until it is cut
