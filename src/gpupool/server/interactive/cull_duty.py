"""The idle-culling duty of the leader's loop: read the live interactive sessions and the
tenants' idle policies, decide (``culling.decide``, pure), apply under the leader's fence —
each decision only while what it rests on is unchanged (a keystroke between the read and the
write keeps the session). A release ends the job as cancelled with an ``idle-culled`` reason
and meters its allocation up to now; warnings and withdrawals bump the nodes' version so the
agents' orders, which carry the warning to the session's terminals, are read again."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import AllocationRow, JobRow, TenantRow
from gpupool.server.interactive.culling import ACTOR, Act, CullDecision, IdleFacts, decide
from gpupool.server.interactive.idle_policy import IdleRule, Policy, read_policy, resolve
from gpupool.server.lifecycle import HOLDING, bump_nodes_version, finish


@dataclass
class Applied:
    warned: list[int] = field(default_factory=list)  # job ids
    released: list[int] = field(default_factory=list)
    withdrawn: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tree:
    """Every tenant's parent and own idle policy."""

    parents: Mapping[str, str | None]
    policies: Mapping[str, Policy]


def read_tree(s: Session) -> Tree:
    rows = s.execute(select(TenantRow.name, TenantRow.parent, TenantRow.idle_policy)).all()
    return Tree({n: p for n, p, _ in rows}, {n: read_policy(raw) for n, _, raw in rows if raw})


def read_sessions(s: Session) -> list[IdleFacts]:
    """The live interactive allocations whose workload started (none is idle before)."""
    rows = s.execute(
        select(
            AllocationRow.id,
            AllocationRow.job_id,
            AllocationRow.tenant,
            JobRow.priority_class,
            AllocationRow.started_at,
            AllocationRow.active_at,
            AllocationRow.input_at,
            AllocationRow.idle_warned_at,
            AllocationRow.idle_release_at,
        )
        .join(JobRow, JobRow.id == AllocationRow.job_id)
        .where(
            AllocationRow.state == "active",
            AllocationRow.started_at.is_not(None),
            JobRow.interactive.is_not(None),
            JobRow.state == "running",
        )
        .order_by(AllocationRow.id)
    ).all()
    out = []
    for alloc_id, job_id, tenant, klass, started, active, typed, warned, release in rows:
        assert started is not None  # the query's filter
        out.append(IdleFacts(alloc_id, job_id, tenant, klass, started, active, typed, warned,
                             release))  # fmt: skip
    return out


def plan(s: Session, default: IdleRule, now: float) -> list[CullDecision]:
    """Read and decide (one read transaction, nothing written)."""
    sessions = read_sessions(s)
    if not sessions:
        return []
    tree = read_tree(s)
    return decide(
        sessions,
        lambda f: resolve(f.tenant, f.priority_class, tree.policies, tree.parents, default),
        now,
    )


def apply(s: Session, decisions: list[CullDecision], now: float) -> Applied:
    """The decisions, in the leader's fenced write; one whose session changed since it was
    read is left to the next pass."""
    done = Applied()
    for d in decisions:
        alloc = s.get(AllocationRow, d.facts.alloc_id, with_for_update=True)
        if alloc is None or alloc.state != "active":
            continue
        if (alloc.active_at, alloc.input_at, alloc.idle_warned_at) != d.facts.clock:
            continue
        if d.act is Act.WARN:
            alloc.idle_warned_at, alloc.idle_release_at = now, d.release_at
            done.warned.append(alloc.job_id)
        elif d.act is Act.WITHDRAW:
            alloc.idle_warned_at = alloc.idle_release_at = None
            done.withdrawn.append(alloc.job_id)
        else:
            job = s.get(JobRow, alloc.job_id, with_for_update=True)
            if job is None or job.state not in HOLDING:
                continue
            finish(s, job, "cancelled", now, d.reason(now), ACTOR)
            done.released.append(job.id)
    if done.warned or done.withdrawn:
        bump_nodes_version(s)  # the agents' orders carry the warning: read them again
    return done
