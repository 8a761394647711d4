"""Victims lose least work (issue 49), pure: a job's last checkpoint its agent passed on
counts, so a long-running job that just saved goes before a younger one that never did; and
the victim order's setting (issue 58): least work lost, or seconds lost per card."""

from gpupool.model import Job, JobKind, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.actions.victims import lost_if_stopped
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

NODE = Node("n1", 8000, 64 * 1024, make_devices("A100-80G", 2, node="n1"))


def _on(job_id: str, device: int):
    data = {"policy": "", "nodes": [{"node": "n1", "cpu_millis": 1000, "mem_mib": 4096,
            "devices": [{"device": device, "compute_pct": 100, "mem_mib": 81920,
                         "exclusive": True, "mig_profile": None, "mig_start": None}]}]}  # fmt: skip
    return placement_from_json(job_id, data)


def _job(job_id: str, tenant: str, grace: int | None = None) -> Job:
    return Job(job_id, parse_request("gpu=1,cpu=1,mem=4GiB"), tenant=tenant,
               kind=JobKind.TRAINING, checkpoint_grace_s=grace)  # fmt: skip


def _tree() -> TenantTree:
    return TenantTree([
        Tenant("org"),
        Tenant("a", "org", {"gpu": Quota.cards(2)}),
        Tenant("b", "org", {"gpu": Quota.cards(0)}),
    ])  # fmt: skip


def test_work_lost_counts_from_the_last_checkpoint_and_at_most_the_grace():
    old = RunningJob(_job("old", "b"), _on("old", 0), 0.0, True, checkpointed_at=95.0)
    young = RunningJob(_job("young", "b"), _on("young", 1), 50.0, True)
    assert lost_if_stopped(old, 100.0) == 5.0  # one card, 5 s since its checkpoint
    assert lost_if_stopped(young, 100.0) == 50.0  # all it ran
    saver = RunningJob(_job("s", "b", grace=3), _on("s", 1), 0.0, True, checkpointed_at=10.0)
    assert lost_if_stopped(saver, 100.0) == 3.0  # it saves on the signal


def test_a_reclaim_takes_the_job_that_just_saved_over_a_younger_one():
    state = ClusterState([NODE])
    old = RunningJob(_job("old", "b"), _on("old", 0), 0.0, True, checkpointed_at=95.0)
    young = RunningJob(_job("young", "b"), _on("young", 1), 50.0, True)
    for r in (old, young):
        state.apply(r.placement)
    result = run_cycle(state, [old, young], [_job("mine", "a")], _tree(), 100.0)
    assert [p.job_id for p in result.preemptions] == ["old"]
    without = RunningJob(old.job, old.placement, 0.0, True)  # no checkpoint said: the youngest
    state = ClusterState([NODE])
    for r in (without, young):
        state.apply(r.placement)
    again = run_cycle(state, [without, young], [_job("mine", "a")], _tree(), 100.0)
    assert [p.job_id for p in again.preemptions] == ["young"]


WIDE = Node("n1", 16000, 128 * 1024, make_devices("A100-80G", 5, node="n1"))


def _on_cards(job_id: str, devices: range):
    cards = [{"device": d, "compute_pct": 100, "mem_mib": 81920, "exclusive": True,
              "mig_profile": None, "mig_start": None} for d in devices]  # fmt: skip
    data = {"policy": "", "nodes": [{"node": "n1", "cpu_millis": 1000, "mem_mib": 4096,
                                     "devices": cards}]}  # fmt: skip
    return placement_from_json(job_id, data)


def _wide_tree() -> TenantTree:
    return TenantTree([
        Tenant("org"),
        Tenant("a", "org", {"gpu": Quota.cards(5)}),
        Tenant("b", "org", {"gpu": Quota.cards(0)}),
    ])  # fmt: skip


def _reclaim(running: list[RunningJob], order: str) -> list[str]:
    state = ClusterState([WIDE])
    for r in running:
        state.apply(r.placement)
    config = CycleConfig(victim_order=order)  # type: ignore[arg-type]
    result = run_cycle(state, running, [_job("mine", "a")], _wide_tree(), 100.0, config=config)
    return [p.job_id for p in result.preemptions]


def test_the_victim_order_is_work_lost_or_seconds_per_card_and_savers_go_first_in_both():
    big = RunningJob(_job("big", "b"), _on_cards("big", range(4)), 40.0, True)  # 4 x 60 s
    small = RunningJob(_job("small", "b"), _on_cards("small", range(4, 5)), 30.0, True)  # 70 s
    assert _reclaim([big, small], "work") == ["small"]  # 70 card-s lost, not 240
    assert _reclaim([big, small], "age") == ["big"]  # the youngest: 60 s a card, not 70
    assert CycleConfig().victim_order == "work"
    saver = RunningJob(_job("big", "b", grace=5), big.placement, 40.0, True)  # loses 4 x 5 s
    for order in ("work", "age"):
        assert _reclaim([saver, small], order) == ["big"]
