"""A minimum run time before a job is stopped for another (issue 64), pure: per class, a
tenant's override, the bound past which a guarantee takes protected jobs anyway, and the
typed reasons on both sides."""

from gpupool.model import Job, JobKind, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.min_runtime import MinRuntime
from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.reasons import Cause, Protection, Wait
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

NODE = Node("n1", 8000, 64 * 1024, make_devices("A100-80G", 2, node="n1"))
NOW = 10_000.0


def _on(job_id: str, device: int):
    data = {"policy": "", "nodes": [{"node": "n1", "cpu_millis": 1000, "mem_mib": 4096,
            "devices": [{"device": device, "compute_pct": 100, "mem_mib": 81920,
                         "exclusive": True, "mig_profile": None, "mig_start": None}]}]}  # fmt: skip
    return placement_from_json(job_id, data)


def _job(job_id: str, tenant: str, submit: float = 0.0, cls: str = "training") -> Job:
    return Job(job_id, parse_request("gpu=1,cpu=1,mem=4GiB"), tenant=tenant,
               kind=JobKind.TRAINING, priority_class=cls, submit_time=submit)  # fmt: skip


def _tree() -> TenantTree:
    return TenantTree([
        Tenant("org"),
        Tenant("a", "org", {"gpu": Quota.cards(2)}),
        Tenant("b", "org", {"gpu": Quota.cards(0)}),
    ])  # fmt: skip


def _reclaim(running: list[RunningJob], claim: Job, min_runtime: MinRuntime):
    state = ClusterState([NODE])
    for r in running:
        state.apply(r.placement)
    config = CycleConfig(min_runtime=min_runtime)
    return run_cycle(state, running, [claim], _tree(), NOW, config=config)


OLD = RunningJob(_job("old", "b"), _on("old", 0), NOW - 3600, True)  # an hour ago
YOUNG = RunningJob(_job("young", "b"), _on("young", 1), NOW - 60, True)  # a minute ago
TRAINING_30 = MinRuntime(by_class={"training": 1800.0}, bound_s=600.0)


def test_a_reclaim_passes_over_a_job_within_its_minimum_run_time():
    # without a minimum the young one goes: it loses least work
    plain = _reclaim([OLD, YOUNG], _job("mine", "a", NOW), MinRuntime())
    assert [p.job_id for p in plain.preemptions] == ["young"]
    result = _reclaim([OLD, YOUNG], _job("mine", "a", NOW), TRAINING_30)
    assert [(p.job_id, p.cause, p.protection) for p in result.preemptions] == [
        ("old", Cause.RECLAIM, Protection.NONE)
    ]
    assert [b.job_id for b in result.bindings] == ["mine"]


def test_only_protected_jobs_would_make_room_the_claim_waits_and_is_told_until_when():
    both = [
        RunningJob(_job("y1", "b"), _on("y1", 0), NOW - 300, True),  # protected until NOW+1500
        YOUNG,  # until NOW + 1740
    ]
    result = _reclaim(both, _job("mine", "a", NOW - 60), TRAINING_30)  # waited a minute
    assert result.preemptions == [] and result.bindings == []
    reason = result.pending["mine"]
    assert reason.code is Wait.PROTECTED
    assert "minimum run time (the first of them until 1970-01-01T03:11:40Z)" in str(reason)
    assert "once it has waited 10 min (from 1970-01-01T02:55:40Z)" in str(reason)


def test_past_the_bound_a_guarantee_takes_a_protected_job_and_says_so():
    both = [RunningJob(_job("y1", "b"), _on("y1", 0), NOW - 300, True), YOUNG]
    result = _reclaim(both, _job("mine", "a", NOW - 600), TRAINING_30)  # waited the bound
    assert len(result.preemptions) == 1
    p = result.preemptions[0]
    assert p.job_id == "young" and p.protection is Protection.WAIVED  # least work lost
    assert "within its minimum run time of 30 min" in p.reason
    assert "waited past the 10 min bound for a guarantee" in p.reason


def test_a_tenant_overrides_its_class_for_its_jobs_and_its_subtree():
    mr = MinRuntime(by_class={"training": 1800.0}, by_tenant={"org": 0.0}, bound_s=600.0)
    result = _reclaim([OLD, YOUNG], _job("mine", "a", NOW), mr)
    assert [p.job_id for p in result.preemptions] == ["young"]  # b inherits org's 0
    assert mr.of(YOUNG.job, ("b", "org")) == 0.0
    assert mr.of(YOUNG.job, ("b",)) == 1800.0
    assert MinRuntime(by_tenant={"b": 120.0}).of(YOUNG.job, ("b", "org")) == 120.0


def test_preemption_within_a_tenant_honours_it_too():
    tree = TenantTree([Tenant("org"), Tenant("a", "org", {"gpu": Quota.cards(2)})])
    low = [
        RunningJob(_job(f"d{i}", "a", cls="dev-test"), _on(f"d{i}", i), NOW - 120, False)
        for i in range(2)
    ]
    state = ClusterState([NODE])
    for r in low:
        state.apply(r.placement)
    config = CycleConfig(min_runtime=MinRuntime(by_class={"dev-test": 600.0}, bound_s=3600))
    high = _job("hi", "a", NOW - 30, cls="online-inference")
    result = run_cycle(state, low, [high], tree, NOW, config=config)
    assert result.preemptions == [] and result.pending["hi"].code is Wait.PROTECTED
    assert "preempt: the jobs that would make room" in str(result.pending["hi"])
