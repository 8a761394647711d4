"""Why a job waits is a typed value: each refusal of the engine carries its code, and code
outside the engine decides on the code, never on the words (a table, one row per case)."""

import pytest

from gpupool.model import Job, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.reasons import Reason, Wait
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from gpupool.server.hybrid_modes import waiting_for_room


def _nodes(n: int = 2, cards: int = 2) -> list[Node]:
    return [
        Node(f"n{i}", 64000, 262144, make_devices("A100-80G", cards, node=f"n{i}"))
        for i in range(n)
    ]


def _tree(**cards: float) -> TenantTree:
    """Teams under one org, each guaranteed its cards and borrowing none."""
    return TenantTree(
        [Tenant("org")]
        + [Tenant(t, "org", {"gpu": Quota.cards(c, borrowing=0)}) for t, c in cards.items()]
    )


def _job(job_id: str, spec: str, tenant: str = "a", **kw: object) -> Job:
    return Job(job_id, parse_request(spec), tenant=tenant, **kw)  # type: ignore[arg-type]


CASES = [
    # (what, pending jobs, tenants' guaranteed cards, the job asked about, its code)
    ("no card is that big", [_job("big", "gpu=8")], {"a": 8}, "big", Wait.NO_ROOM),
    ("a gang with no room for its last worker", [_job("g", "gpu=2", gang_size=3)],
     {"a": 8}, "g", Wait.NO_ROOM),
    ("over its guarantee, may borrow none", [_job("q1", "gpu=2"), _job("q2", "gpu=2")],
     {"a": 2, "b": 2}, "q2", Wait.QUOTA),
    ("an unknown tenant", [_job("who", "gpu=1", tenant="nobody")], {"a": 4}, "who",
     Wait.INVALID),
]  # fmt: skip


@pytest.mark.parametrize(("what", "pending", "quotas", "job", "code"), CASES)
def test_each_refusal_carries_its_code(what, pending, quotas, job, code):
    result = run_cycle(ClusterState(_nodes()), [], pending, _tree(**quotas), 0)
    reason = result.pending[job]
    assert isinstance(reason, Reason) and reason.code is code, (what, reason)
    assert str(reason) == reason.message and reason.message  # people still read words


def test_hybrid_pools_count_a_gang_that_waits_for_room():
    """A gang's refusal starts with how many workers were placed: the words differ, the code
    does not, so a hybrid pool sees it waits for room as a single job does."""
    gang = _job("g", "gpu_share=0.5", gang_size=3)
    result = run_cycle(ClusterState(_nodes(1, 1)), [], [gang], _tree(a=4), 0)
    assert str(result.pending["g"]).startswith("gang ")
    assert waiting_for_room(result, [gang], {"A100-80G"}) == (0, 1)
