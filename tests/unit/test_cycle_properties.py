"""Property tests for quotas and preemption over several cycles."""

from hypothesis import given
from hypothesis import strategies as st

from gpupool.model import Job, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import RunningJob, run_cycle
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.tenants import CARD, Quota, Tenant, TenantTree

CLASSES = ["online-inference", "training", "dev-test"]
SPECS = ["gpu=1", "gpu=2", "gpu=4", "gpu_share=0.5", "gpu=1,cpu=8"]


@st.composite
def tenant_specs(draw):
    n = draw(st.integers(2, 4))
    out = []
    for i in range(n):
        nominal = draw(st.integers(0, 8))
        borrowing = draw(st.one_of(st.none(), st.integers(0, 6)))
        lending = draw(st.one_of(st.none(), st.integers(0, 6)))
        out.append((f"t{i}", nominal, borrowing, lending))
    return out


def build_tree(specs) -> TenantTree:
    tenants = [Tenant("org")]
    for name, nominal, borrowing, lending in specs:
        tenants.append(Tenant(name, "org", {"gpu": Quota.cards(nominal, borrowing, lending)}))
    return TenantTree(tenants)


@st.composite
def job_batches(draw, tenants):
    batches = []
    for cycle in range(draw(st.integers(1, 4))):
        batch = []
        for i in range(draw(st.integers(0, 10))):
            batch.append(
                Job(
                    f"c{cycle}j{i}",
                    parse_request(draw(st.sampled_from(SPECS))),
                    tenant=draw(st.sampled_from(tenants)),
                    priority_class=draw(st.sampled_from(CLASSES)),
                    submit_time=cycle * 10 + i * 0.01,
                )
            )
        batches.append(batch)
    return batches


@given(data=st.data(), specs=tenant_specs())
def test_quota_limits_and_preemption_rules_hold_over_cycles(data, specs):
    nodes = [
        Node(f"n{i}", 32000, 262144, make_devices("A100-80G", 4, node=f"n{i}")) for i in range(3)
    ]
    names = [s[0] for s in specs]
    limits = {name: (nominal, borrowing, lending) for name, nominal, borrowing, lending in specs}
    batches = data.draw(job_batches(names))
    running: list[RunningJob] = []
    waiting: list[Job] = []
    queue = QueuePolicy(aging_s=0)
    from gpupool.scheduler.cycle import CycleConfig

    for cycle, batch in enumerate(batches):
        now = cycle * 10 + 5
        pending = waiting + batch
        state = ClusterState(nodes)
        tree = build_tree(specs)
        before = {r.job.id: r for r in running}
        result = run_cycle(state, running, pending, tree, now, config=CycleConfig(queue=queue))
        state.check_invariants()
        bound = {b.job_id for b in result.bindings}
        by_id = {j.id: j for j in pending}
        for p in result.preemptions:
            assert p.by in bound  # never preempt without placing the preemptor
            victim, preemptor = before[p.job_id], by_id[p.by]
            same = victim.job.tenant == preemptor.tenant
            lower = queue.base_priority(victim.job) < queue.base_priority(preemptor)
            assert (same and lower) or (not same and victim.borrowed)
        evicted = {p.job_id for p in result.preemptions}
        running = [r for r in running if r.job.id not in evicted]
        running += [
            RunningJob(by_id[b.job_id], b.placement, now, b.borrowed) for b in result.bindings
        ]
        waiting = [j for j in pending if j.id not in bound]
        waiting += [before[v].job for v in evicted]  # suspended victims requeue
        used: dict[str, int] = {}
        borrowed_total = 0
        for r in running:
            used[r.job.tenant] = used.get(r.job.tenant, 0) + sum(
                d.compute_pct if not d.exclusive else CARD for d in r.placement.devices
            )
        for name, (nominal, borrowing, _) in limits.items():
            over = used.get(name, 0) - nominal * CARD
            if borrowing is not None:
                assert over <= borrowing * CARD, (name, used, limits)
            borrowed_total += max(0, over)
        if all(lending is not None for _, _, lending in limits.values()):
            lendable = sum(min(n, lend) for n, _, lend in limits.values()) * CARD
            assert borrowed_total <= lendable


def test_nobody_borrows_when_nothing_may_be_lent():
    specs = [("a", 2, None, 0), ("b", 2, None, 0)]
    nodes = [Node("n0", 64000, 262144, make_devices("A100-80G", 8, node="n0"))]
    jobs = [Job(f"j{i}", parse_request("gpu=1"), tenant="a") for i in range(6)]
    result = run_cycle(ClusterState(nodes), [], jobs, build_tree(specs), 0)
    assert result.admitted == 2
    assert (
        str(result.pending["j2"])
        == "quota: a gpu 2/2 guaranteed, no idle capacity to borrow in the cohort"
    )
