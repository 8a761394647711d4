"""Defragmentation: the issue's story — inference at 6 of its 10 guaranteed cards asks for 4
on one server while 8 cards are free but scattered — gets its cards by moving the fewest jobs
that allow it, never an inference replica, never a job that forbids it, never for borrowing;
the moved jobs restart in the next cycle."""

import json
import time
from dataclasses import replace

import pytest

from gpupool.model import Job, JobKind, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.types import DeviceGrant, NodeGrant, Placement
from tests.support.builders import OPENB_HEADER, cluster, tree

ON = CycleConfig(defrag_moves=4, defrag_after_s=60)
LAYOUT = {  # node -> jobs on it, one card each; every node has 4 cards
    "s00": ["inf0", "inf1", "tr0"],
    "s01": ["inf2", "inf3", "tr1"],
    "s02": ["inf4", "inf5", "tr2"],
    "s03": ["tr3", "tr4"],
    "s04": ["tr5"],
}


def running(**overrides) -> list[RunningJob]:
    out = []
    for node, names in LAYOUT.items():
        for i, name in enumerate(names):
            tenant = "inference" if name.startswith("inf") else "training"
            kind = JobKind.INFERENCE if tenant == "inference" else JobKind.TRAINING
            fields = {"tenant": tenant, "kind": kind, **overrides.get(name, {})}
            job = Job(name, parse_request("gpu=1"), **fields)
            grant = DeviceGrant(node, i, 100, 81920, exclusive=True)
            placement = Placement(name, (NodeGrant(node, 0, 0, (grant,)),), "test")
            out.append(RunningJob(job, placement, start_time=100.0 * (i + 1)))
    return out


def ask(spec: str = "gpu=4", submitted: float = 0.0) -> Job:
    return Job("big", parse_request(spec), tenant="inference", submit_time=submitted)


def cycle(jobs: list[RunningJob], waiting: list[Job], config=ON, now: float = 1000.0):
    tenants = tree(inference=10, training=10)  # 20 guaranteed of 20 cards: nothing to borrow
    return run_cycle(ClusterState(cluster(5)), jobs, waiting, tenants, now, config=config)


def test_without_defragmentation_the_job_waits_for_ever():
    result = cycle(running(), [ask()], CycleConfig())
    assert result.admitted == 0 and "big" in result.pending


def test_the_fewest_moves_free_a_node_and_the_moved_job_keeps_the_room_found_for_it():
    jobs = running()
    result = cycle(jobs, [ask()])
    binding, again = result.bindings
    assert binding.action == "defragment" and binding.after == ("tr5",)
    assert binding.placement.node_names == ("s04",) and len(binding.placement.devices) == 4
    (moved,) = result.preemptions
    assert moved.job_id == "tr5" and moved.action == "suspend" and moved.cause is Cause.DEFRAGMENT
    assert moved.reason.startswith("moved by defragmentation: restarts on s0")
    assert binding.note.startswith("defragmenting: moving job tr5 from s04 to s0")
    assert binding.note.endswith("to free 4 cards on s04")
    # tr5 is bound at once where the plan found room, behind its own stopping workload, so
    # no job ahead of it in the queue can take that room before it restarts
    assert (again.job_id, again.action, again.after) == ("tr5", "defragment", ("tr5",))
    assert again.placement.node_names[0] != "s04" and "tr5" not in result.pending


def test_jobs_that_forbid_it_are_never_moved():
    jobs = running(tr5={"on_preempt": "kill"})
    result = cycle(jobs, [ask()])
    binding, *moved = result.bindings
    assert binding.placement.node_names == ("s03",)  # two moves instead of the forbidden one
    assert {p.job_id for p in result.preemptions} == {b.job_id for b in moved} == {"tr3", "tr4"}
    kill_all = {f"tr{i}": {"on_preempt": "kill"} for i in range(6)}
    result = cycle(running(**kill_all), [ask()])
    assert result.admitted == 0 and not result.preemptions  # only replicas + kill: no room
    assert str(result.pending["big"]).endswith("; no defragmentation move frees room for it")


def test_inference_replicas_are_copied_before_they_stop():
    """Only s00 can be freed (the other training jobs forbid moving): its two replicas get a
    copy elsewhere first (make-before-break), tr0 is moved; big waits for the replicas to stop
    and nothing else is planned while their copies start."""
    kill = {f"tr{i}": {"on_preempt": "kill"} for i in range(1, 6)}
    result = cycle(running(**kill), [ask()])
    assert [b.job_id for b in result.bindings] == ["tr0"]  # moved, bound where it restarts
    assert {r.job_id for r in result.replacements} == {"inf0", "inf1"}
    assert [p.job_id for p in result.preemptions] == ["tr0"]
    assert all(r.by == "big" and "a copy starts on s0" in r.reason for r in result.replacements)
    assert all(r.placement.node_names[0] != "s00" for r in result.replacements)
    said = str(result.pending["big"])
    assert said.startswith("defragmenting: starting copies of job inf0 on s0")
    assert said.endswith("to free 4 cards on s00; it starts once they stopped")
    waiting = CycleConfig(defrag_moves=4, defrag_after_s=60, replacing=frozenset({"inf0"}))
    result = cycle(running(**kill), [ask()], waiting)
    assert not result.replacements and not result.preemptions
    assert str(result.pending["big"]).endswith(
        "defragmentation waits for the copies of job inf0 to start"
    )


@pytest.mark.parametrize(
    ("waiting", "why"),
    [
        (ask("gpu=5"), "over its guarantee: defragmentation never serves borrowing"),
        (ask(submitted=990.0), "has not waited defrag_after_s yet"),
    ],
)
def test_only_guaranteed_jobs_that_waited_are_served(waiting, why):
    result = cycle(running(), [waiting])
    assert result.admitted == 0 and not result.preemptions, why


def test_an_urgent_class_is_served_beyond_its_guarantee_but_never_at_anothers_cost():
    """inference (2 guaranteed, both held on s00) asks 4 more cards, borrowing; every server
    has 1-2 free cards. Only its own replicas may make room (training runs inside its
    guarantee): with defrag_class set, they are copied off s00; without, nothing moves."""
    layout = {"s00": ["inf0", "inf1"], **{f"s0{n}": [f"tr{3 * n + i}" for i in range(3)]
                                          for n in range(1, 5)}}  # fmt: skip
    jobs = []
    for node, names in layout.items():
        for i, name in enumerate(names):
            team, kind = ("inference", JobKind.INFERENCE) if name.startswith("inf") else (
                "training", JobKind.TRAINING)  # fmt: skip
            grant = DeviceGrant(node, i, 100, 81920, exclusive=True)
            placement = Placement(name, (NodeGrant(node, 0, 0, (grant,)),), "test")
            job = Job(name, parse_request("gpu=1"), tenant=team, kind=kind)
            jobs.append(RunningJob(job, placement, start_time=100.0))

    def run(config):  # a fresh snapshot and tenant tree: a cycle charges what it is given
        tenants = tree(inference=2, training=18)
        return run_cycle(ClusterState(cluster(5)), jobs, [ask()], tenants, 5000.0, config=config)

    plain = run(CycleConfig(defrag_moves=4, defrag_after_s=60))
    assert (
        not plain.replacements
        and not plain.preemptions
        and "defragment" not in (str(plain.pending["big"]))
    )
    urgent = run(CycleConfig(defrag_moves=4, defrag_after_s=60, defrag_class="training"))
    assert {r.job_id for r in urgent.replacements} == {"inf0", "inf1"}
    assert not urgent.preemptions  # the training team's guaranteed jobs stay where they are


def test_the_gain_must_beat_the_cost():
    """tr5 ran 900 s on one card; the ask (4 cards) waited 100 s: 400 card-seconds denied do
    not pay for up to 900 lost — unless tr5 checkpoints every minute."""
    late = ask(submitted=900.0)
    result = cycle(running(), [late], CycleConfig(defrag_moves=4, defrag_after_s=60))
    assert result.admitted == 0 and not result.preemptions
    assert "defragmentation waits: moving 1 job would lose up to 0.25 card-hours" in (
        str(result.pending["big"])
    )
    often = CycleConfig(defrag_moves=4, defrag_after_s=60, defrag_checkpoint_s=60)
    assert "big" in {b.job_id for b in cycle(running(), [late], often).bindings}


@pytest.mark.parametrize(
    "config, said",
    [
        (CycleConfig(defrag_moves=1), "defragmentation would move 2 jobs, 1 move left in this"),
        (
            CycleConfig(defrag_moves=1, defrag_hourly=12),
            "defragmentation would move 2 jobs, 1 move left of this hour's 12",
        ),
        (CycleConfig(defrag_moves=0, defrag_hourly=12), "defragmentation paused: this hour's 12"),
        (CycleConfig(defrag_moves=0, defrag_hourly=0), None),  # off: not a word of it
    ],
)
def test_the_bound_refuses_a_plan_that_needs_more_moves_and_says_so(config, said):
    config.defrag_after_s = 60
    result = cycle(running(tr5={"on_preempt": "kill"}), [ask()], config)  # s03 needs 2 moves
    assert result.admitted == 0 and not result.preemptions
    if said is None:
        assert "defragment" not in str(result.pending["big"])
    else:
        assert said in str(result.pending["big"]), str(result.pending["big"])


def test_the_server_moves_audits_and_says_why(tmp_path):
    """Through the API: five servers x 4 cards, no borrowing (top-level teams, guarantees
    that add up to the pool), 12 cards held, 8 free scattered; a 4-card inference job within
    its guarantee gets a server."""
    from gpupool.server.settings import Settings
    from tests.support.cluster import ok, seed_cluster, submit
    from tests.support.live import live_server

    settings = Settings(data_dir=tmp_path, log_json=False, defrag_after_s=0)
    with live_server(settings) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=5, cards=4, tenants={"inference": 10, "training": 10})
        ids = {}
        for i in range(20):  # fill every card, alternating teams
            team = "inference" if i % 2 else "training"
            kind = "inference" if team == "inference" else "training"
            # all of class training: moved, not copied (online-inference replicas are copied)
            job = submit(admin, "gpu=1", team, kind=kind, priority_class="training")
            ids[job["id"]] = team
        srv.cycle()
        allocs = ok(admin.get("/api/v1/allocations", params={"state": "active"}))["items"]
        by_node: dict[str, list[int]] = {}
        for a in sorted(allocs, key=lambda a: a["job_id"]):
            by_node.setdefault(a["nodes"][0]["node"], []).append(a["job_id"])
        # free 2, 2, 2, 1, 1 cards; then inference's guarantee is what it holds + 4
        for count, node in zip((2, 2, 2, 1, 1), sorted(by_node), strict=True):
            for job_id in by_node[node][:count]:
                ok(admin.post(f"/api/v1/jobs/{job_id}/cancel"))
                del ids[job_id]
        held = sum(team == "inference" for team in ids.values())
        for team, cards in (("inference", held + 4), ("training", 16 - held)):
            quota = {"resource": "gpu", "nominal": cards}
            ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))
        big = submit(admin, "gpu=4", "inference", kind="inference", name="big",
                     priority_class="training")  # fmt: skip
        srv.cycle()  # it has not waited: moving jobs would cost more than it gains
        job = ok(admin.get(f"/api/v1/jobs/{big['id']}"))
        assert job["state"] == "pending" and "defragmentation waits: moving" in job["reason"]
        srv.cycle(now=time.time() + 3000)  # 4 cards x 50 min waited beat <= 2 moves x 1 h
        job = ok(admin.get(f"/api/v1/jobs/{big['id']}"))
        assert job["state"] == "admitted", job["reason"]
        assert job["reason"].startswith("defragment: within guarantee; defragmenting: moving job")
        moved = job["allocation"]["after"]
        assert moved and len(job["allocation"]["nodes"][0]["devices"]) == 4
        audit = ok(admin.get("/api/v1/audit", params={"action": "DEFRAGMENT"}))["items"]
        assert len(audit) == len(moved)
        victims = [a["target"].split()[1] for a in audit]
        assert all(ids[int(v)] == "training" for v in victims)  # the cheapest plan here
        big_node = job["allocation"]["nodes"][0]["node"]
        for v in victims:  # bound again at once where the plan found room, behind itself
            state = ok(admin.get(f"/api/v1/jobs/{v}"))
            assert state["state"] == "admitted", state["reason"]
            assert state["reason"].startswith("defragment: within guarantee; moved by defrag")
            events = ok(admin.get(f"/api/v1/jobs/{v}/events"))
            assert [e["to_state"] for e in events[-3:]] == ["preempted", "pending", "admitted"]
            where = state["allocation"]
            assert where["nodes"][0]["node"] != big_node and len(where["after"]) == 1


def _one_node(mode, spec_of: dict[str, tuple[str, int]], cards: int = 8):
    """One node (NVLink islands of 4); ``spec_of``: job -> (request, its card, or for a MIG
    request its start slice on card 0)."""
    from gpupool.model import Node, SharingMode, make_devices
    from gpupool.scheduler import Placer
    from gpupool.scheduler.defrag import Movable

    devices = make_devices("A100-80G", cards, node="n0", mode=mode, island_size=4)
    state = ClusterState([Node("n0", 64000, 512 * 1024, devices)])
    placer, movable = Placer("best-fit"), []
    for name, (spec, where) in spec_of.items():
        job = Job(name, parse_request(spec), tenant="t")
        placement = placer.place(state, job, None, explain=False)
        if mode is SharingMode.MIG:
            grants = tuple(replace(g, device=0, mig_start=where) for g in placement.devices)
        else:
            grants = tuple(replace(g, device=where) for g in placement.devices)
        placement = Placement(name, (NodeGrant("n0", 0, 0, grants),), "test")
        state.apply(placement)
        movable.append(Movable(job, placement, started=0.0))

    def place(s, job, allowed):
        result = placer.place(s, job, allowed, explain=False)
        return result if isinstance(result, Placement) else None

    return state, movable, place


def test_shares_are_repacked_onto_fewer_cards_of_their_node():
    """One node, no other: eight half-card shares on eight cards leave no whole card; moving
    one share next to another frees a card — a move within the node."""
    from gpupool.model import SharingMode
    from gpupool.scheduler.defrag import plan_defrag

    shares = {f"s{i}": ("gpu_share=0.5", i) for i in range(8)}
    state, movable, place = _one_node(SharingMode.SHARE, shares)
    plan = plan_defrag(state, Job("w", parse_request("gpu=1"), tenant="t"), movable, place, 10.0)
    assert plan is not None and len(plan.moves) == 1
    (move,) = plan.moves
    assert move.targets() == "n0" and move.route() == "to other cards of n0"
    freed = {g.device for g in plan.placement.devices}
    assert freed == {g.device for m in movable if m.job.id == move.job_id
                     for g in m.placement.devices}  # fmt: skip
    assert move.target.devices[0].device != next(iter(freed))
    assert plan.describe() == f"defragmenting: moving job {move.job_id} to other cards of n0 " \
        "to free 1 card on n0"  # fmt: skip


def test_a_job_moves_to_the_other_nvlink_island_to_free_one():
    """Cards 0 and 4 taken, one per island: a 4-card NVLink job fits on neither island until
    one job moves to the other island of the same node."""
    from gpupool.model import SharingMode
    from gpupool.scheduler.defrag import plan_defrag

    state, movable, place = _one_node(SharingMode.WHOLE, {"a": ("gpu=1", 0), "b": ("gpu=1", 4)})
    wide = Job("w", parse_request("gpu=4,topology=nvlink"), tenant="t")
    assert place(state, wide, None) is None
    plan = plan_defrag(state, wide, movable, place, 10.0)
    assert plan is not None and len(plan.moves) == 1
    (move,) = plan.moves
    islands = {g.device // 4 for g in plan.placement.devices}
    assert len(islands) == 1 and move.target.devices[0].device // 4 not in islands


def test_a_mig_card_is_re_laid_out_by_moving_an_instance():
    """One MIG card, 1g instances at slices 0 and 4: a 4g instance (slices 0-3) does not fit
    though 5 slices are free, until the job at slice 0 restarts on another slice."""
    from gpupool.model import SharingMode
    from gpupool.scheduler.defrag import plan_defrag

    jobs = {"a": ("mig=1g.10gb", 0), "b": ("mig=1g.10gb", 4)}
    state, movable, place = _one_node(SharingMode.MIG, jobs, cards=1)
    wide = Job("w", parse_request("mig=4g.40gb"), tenant="t")
    assert place(state, wide, None) is None  # fragmented by the two 1g instances on card 0
    plan = plan_defrag(state, wide, movable, place, 10.0)
    assert plan is not None and len(plan.moves) == 1
    (grant,) = plan.placement.devices
    assert (grant.device, grant.mig_profile, grant.mig_start) == (0, "4g.40gb", 0)
    (move,) = plan.moves
    assert move.target.devices[0].mig_start not in (0, 1, 2, 3)


def test_probes_fit_after_moves_and_count_what_they_cost():
    """Two 4-card servers, two 1-card pods on each: no 4-card job fits as the pool is; with
    moves, one does (two pods moved onto the other server), a second does not."""
    from gpupool.scheduler import Placer
    from gpupool.scheduler.defrag import Movable
    from gpupool.sim.defrag_sim import probe_count

    state = ClusterState(cluster(2))
    placer = Placer("spread")
    placed = {}
    for i in range(4):
        job = Job(f"p{i}", parse_request("gpu=1"))
        placement = placer.place(state, job, explain=False)
        state.apply(placement)
        placed[job.id] = Movable(job, placement, float(i))
    assert sorted(len(state.placements[p].devices) for p in placed) == [1, 1, 1, 1]
    plain = probe_count(state, placer, placed, 4, defrag=False, max_moves=0, max_nodes=0)
    moved = probe_count(state, placer, placed, 4, defrag=True, max_moves=4, max_nodes=8)
    assert plain == {"placeable": 0, "moves": 0, "jobs_interrupted": 0}
    assert moved == {"placeable": 1, "moves": 2, "jobs_interrupted": 2}
    assert len(state.placements) == 4  # the pool itself is left as it was


def test_simulate_defrag_on_a_trace_file(tmp_path):
    from tests.support.cli import gpupool

    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},64000,262144,8,V100M32\n" for i in range(4)))  # fmt: skip
    pods = tmp_path / "pods.csv"
    pods.write_text(
        OPENB_HEADER + "".join(f"p{i},1000,1024,1,1000,,LS,Running,0,100,0\n" for i in range(40))
    )
    run = gpupool("simulate", "defrag", "--nodes", str(nodes), "--pods", str(pods), "--json",
                  "--arrived", "0.5", "--policy", "spread")  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["before"]["placeable_8gpu"] == 0  # spread leaves 4 per server: no 8 fit
    assert out["after"]["placeable_8gpu"] >= 1 and out["moves"] >= 4
    assert out["after"]["placeable_4gpu"] >= out["before"]["placeable_4gpu"]
    bad = gpupool("simulate", "defrag", "--nodes", str(nodes), "--pods", str(pods),
                  "--policy", "nope")  # fmt: skip
    assert bad.returncode == 2 and "policy" in bad.stderr


def test_on_the_seed_scenario_the_guaranteed_team_waits_less():
    """Two days of the seed example, pooled: defragmentation moves jobs and the algorithm
    team (guaranteed 20 cards, 4-card jobs) waits less at p95; nobody waits more."""
    from gpupool.sim.scenario import load_scenario
    from gpupool.sim.team_replay import defrag_waits

    scenario = load_scenario("examples/seed-scenario.yaml").model_copy(update={"days": 2})
    result = defrag_waits(scenario)
    without, with_ = result["without"], result["with"]
    assert with_["preemptions"] > without["preemptions"]
    p95 = {k: {t: v["queue_delay_p95_s"] for t, v in r["tenants"].items()}
           for k, r in (("without", without), ("with", with_))}  # fmt: skip
    assert p95["with"]["algorithm"] < p95["without"]["algorithm"]
    assert all(p95["with"][t] <= p95["without"][t] for t in p95["without"])
