"""The one ledger every billing view reads (docs/billing.md, "One ledger, one number"): the
usage records overlapping a period, plus what live allocations' workloads ran since their
last checkpoint up to the moment the view counts to (``as_of``), which no record holds yet.

Invoices and their drafts, the month-end run, ``usage``, the cost reports, the dashboard's
charts and the overview's cost all read it here, so a running job counts the same in each of
them (issue 59: the reports read closed records only, and left the largest user out while
its job ran). A record crossing the period's edge is the reader's to split
(``gpupool.billing.invoice.parts``), by whole seconds, as metering counts them."""

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import AllocationRow, UsageRow
from gpupool.server.lifecycle import device_models, unmetered_rows

Keep = Callable[[str], bool]  # which tenants a view counts


@dataclass(frozen=True)
class Entry:
    """One record of the ledger: a usage record, or a live allocation's use not yet in one."""

    tenant: str
    job_id: int
    model: str
    start: float
    end: float
    compute_pct_seconds: int
    mem_mib_seconds: int
    cpu_milli_seconds: int
    device_seconds: int
    borrowed: bool
    live: bool = False


def closed_entries(
    s: Session,
    start: float,
    end: float,
    *,
    keep: Keep | None = None,
    tenant: str | None = None,
    jobs: Select | None = None,
) -> list[Entry]:
    """The usage records overlapping [start, end) (of ``tenant``, of tenants ``keep``
    accepts, of the jobs ``jobs`` selects), with whether their allocation was borrowed."""
    u = UsageRow.__table__.c
    q = (
        select(
            u.tenant, u.job_id, u.model, u.start, u.end, u.compute_pct_seconds,
            u.mem_mib_seconds, u.cpu_milli_seconds, u.device_seconds, AllocationRow.borrowed,
        )
        .outerjoin(AllocationRow, AllocationRow.id == u.allocation_id)
        .where(u.end > start, u.start < end)
    )  # fmt: skip
    if tenant is not None:
        q = q.where(u.tenant == tenant)
    if jobs is not None:
        q = q.where(u.job_id.in_(jobs))
    return [
        Entry(t, j, m, a, b, pct, mib, cpu, dev, bool(lent))
        for t, j, m, a, b, pct, mib, cpu, dev, lent in s.execute(q)
        if keep is None or keep(t)
    ]


def live_entries(
    s: Session,
    as_of: float,
    *,
    since: float | None = None,
    keep: Keep | None = None,
    tenant: str | None = None,
    jobs: Select | None = None,
) -> list[Entry]:
    """What live allocations' workloads ran since their last checkpoint (from ``since`` when
    later) up to ``as_of``: nothing for one whose workload has not started."""
    q = select(AllocationRow).where(
        AllocationRow.state == "active", AllocationRow.started_at.is_not(None)
    )
    if tenant is not None:
        q = q.where(AllocationRow.tenant == tenant)
    if jobs is not None:
        q = q.where(AllocationRow.job_id.in_(jobs))
    mine = [a for a in s.execute(q).scalars() if keep is None or keep(a.tenant)]
    if not mine:
        return []
    models = device_models(s, {"nodes": [n for a in mine for n in a.placement["nodes"]]})
    return [
        Entry(
            a.tenant, a.job_id, r["model"], r["start"], r["end"], r["compute_pct_seconds"],
            r["mem_mib_seconds"], r["cpu_milli_seconds"], r["device_seconds"], bool(a.borrowed),
            live=True,
        )
        for a in mine
        for r in unmetered_rows(s, a, as_of, since, models)
    ]  # fmt: skip


def entries(
    s: Session,
    start: float,
    end: float,
    as_of: float | None,
    *,
    keep: Keep | None = None,
    tenant: str | None = None,
    jobs: Select | None = None,
) -> list[Entry]:
    """The ledger of [start, end): its usage records, and with ``as_of`` what live
    allocations ran up to that moment (None: records only — a month metered to its end)."""
    out = closed_entries(s, start, end, keep=keep, tenant=tenant, jobs=jobs)
    if as_of is not None and as_of > start:
        live = live_entries(s, min(as_of, end), keep=keep, tenant=tenant, jobs=jobs)
        out += [e for e in live if e.end > start]
    return out
