"""The cycle's park and wake (issue 49), pure: a parked replica lends its card to the queue
in the same cycle; a wake takes it back, stopping the borrowed job on it (the replica's
tenant within its guarantee), and waits, saying why, when the job there may not give way."""

from gpupool.model import Job, JobKind, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.actions.park import ParkAsk
from gpupool.scheduler.cycle import RunningJob, run_cycle
from gpupool.scheduler.parking import card_of, parked, woken
from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

NODE = Node("n1", 8000, 64 * 1024, make_devices("A100-80G", 1, node="n1"))


def tenants(inference_cards: float) -> TenantTree:
    return TenantTree([
        Tenant("org"),
        Tenant("inference", "org", {"gpu": Quota.cards(inference_cards)}),
        Tenant("training", "org", {"gpu": Quota.cards(0)}),
    ])  # fmt: skip


def replica() -> tuple[Job, object]:
    job = Job("r1", parse_request("gpu=1,cpu=1,mem=4GiB"), tenant="inference",
              kind=JobKind.INFERENCE, priority_class="online-inference")  # fmt: skip
    data = {"policy": "spread", "nodes": [{"node": "n1", "cpu_millis": 1000, "mem_mib": 4096,
            "devices": [{"device": 0, "compute_pct": 100, "mem_mib": 81920, "exclusive": True,
                         "mig_profile": None, "mig_start": None}]}]}  # fmt: skip
    return job, placement_from_json("r1", data)


def training(job_id: str, tenant: str = "training") -> Job:
    return Job(job_id, parse_request("gpu=1,cpu=1,mem=4GiB"), tenant=tenant,
               kind=JobKind.TRAINING, checkpoint_grace_s=5)  # fmt: skip


def test_a_parked_replica_lends_its_card_to_the_queue_in_the_same_cycle():
    job, full = replica()
    state = ClusterState([NODE])
    state.apply(full)
    asks = [ParkAsk("r1", parked(full), False)]
    result = run_cycle(state, [RunningJob(job, full, 0.0)], [training("t1")], tenants(1), 10.0,
                       parks=asks)  # fmt: skip
    assert [(g.job_id, g.wake, g.placement.devices) for g in result.regrants] == [("r1", False, ())]
    assert [b.job_id for b in result.bindings] == ["t1"]  # borrowed the lent card
    assert result.bindings[0].borrowed


def test_a_wake_stops_the_borrowed_job_on_its_card_and_takes_it_back():
    job, full = replica()
    asleep = parked(full)
    state = ClusterState([NODE])
    state.apply(asleep)
    t1 = training("t1")
    t1_at = placement_from_json("t1", {"policy": "", "nodes": [{**_node(full), "mem_mib": 4096}]})
    state.apply(t1_at)
    running = [RunningJob(job, asleep, 0.0), RunningJob(t1, t1_at, 0.0, borrowed=True)]
    asks = [ParkAsk("r1", woken(asleep, card_of(full)), True)]
    result = run_cycle(state, running, [], tenants(1), 10.0, parks=asks)
    assert [(p.job_id, p.by) for p in result.preemptions] == [("t1", "r1")]
    (g,) = result.regrants
    assert g.wake and g.after == ("t1",) and g.placement.devices == full.devices


def test_a_wake_waits_when_the_job_on_its_card_may_not_give_way():
    job, full = replica()
    asleep = parked(full)
    state = ClusterState([NODE])
    state.apply(asleep)
    guaranteed = training("g1", tenant="other")
    at = placement_from_json("g1", {"policy": "", "nodes": [_node(full)]})
    state.apply(at)
    trees = TenantTree([
        Tenant("org"),
        Tenant("inference", "org", {"gpu": Quota.cards(1)}),
        Tenant("other", "org", {"gpu": Quota.cards(1)}),
    ])  # fmt: skip
    running = [RunningJob(job, asleep, 0.0), RunningJob(guaranteed, at, 0.0, borrowed=False)]
    result = run_cycle(state, running, [], trees, 10.0,
                       parks=[ParkAsk("r1", woken(asleep, card_of(full)), True)])  # fmt: skip
    assert not result.preemptions and not result.regrants
    assert "job g1 on its card may not give way to it" in result.unwoken["r1"]


def _node(p) -> dict:
    from gpupool.scheduler.placement_json import placement_to_json

    return placement_to_json(p)["nodes"][0]
