"""Who used an invoice's card-hours (pure): per user, the largest jobs, and how much of it
ran within the tenant's guarantee and how much on capacity it borrowed from others — what a
finance user asks after "how much": "who, on what, and was it ours".

Quantities are card-hours of compute (a share or MIG slice counts its fraction), the part of
each record inside the month, exactly as the invoice's usage lines count them; they explain
the bill and are not priced again."""

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from gpupool.billing.invoice import HOUR, parts

TOP_JOBS = 50


@dataclass(frozen=True)
class JobUsage:
    job_id: int
    user: str
    name: str
    borrowed: bool  # the allocation was admitted on capacity borrowed from other tenants
    model: str
    start: float
    end: float
    compute_pct_seconds: int


def _hours(pct_seconds: Fraction) -> str:
    return f"{float(pct_seconds / (100 * HOUR)):.4f}"


def breakdown(records: Iterable[JobUsage], start: float, end: float, top: int = TOP_JOBS) -> dict:
    """Card-hours in [start, end): in all, within the guarantee and borrowed; per user
    (largest first); the ``top`` largest jobs, and how many were left out of that list."""
    whole: dict[int, list[int]] = {}  # job -> [all, borrowed] of records wholly inside
    cut: dict[int, list[Fraction]] = {}  # the same for parts of records cut by the edges
    about: dict[int, tuple[str, str]] = {}
    for u in records:
        if u.model == "cpu":
            continue  # CPU comes with the cards (as on the invoice)
        about[u.job_id] = (u.user, u.name)
        if start <= u.start and u.end <= end:  # integers only (most records)
            w = whole.setdefault(u.job_id, [0, 0])
            w[0] += u.compute_pct_seconds
            if u.borrowed:
                w[1] += u.compute_pct_seconds
            continue
        part = sum(
            (u.compute_pct_seconds * share for _, _, share in parts(u, start, end, ())),
            Fraction(0),
        )
        c = cut.setdefault(u.job_id, [Fraction(0), Fraction(0)])
        c[0] += part
        if u.borrowed:
            c[1] += part
    jobs: dict[int, list[Fraction]] = {}
    for job in about:
        w, c = whole.get(job, [0, 0]), cut.get(job, [Fraction(0), Fraction(0)])
        if w[0] or c[0]:
            jobs[job] = [w[0] + c[0], w[1] + c[1]]
    users: dict[str, list[Fraction | int]] = {}
    for job, (used, _) in jobs.items():
        row = users.setdefault(about[job][0], [Fraction(0), 0])
        row[0] += used
        row[1] = int(row[1]) + 1
    total = sum((v[0] for v in jobs.values()), Fraction(0))
    borrowed = sum((v[1] for v in jobs.values()), Fraction(0))
    largest = sorted(jobs.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return {
        "card_hours": _hours(total),
        "guaranteed_card_hours": _hours(total - borrowed),
        "borrowed_card_hours": _hours(borrowed),
        "by_user": [
            {"user": user, "jobs": int(n), "card_hours": _hours(Fraction(used))}
            for user, (used, n) in sorted(users.items(), key=lambda kv: (-kv[1][0], kv[0]))
        ],
        "by_job": [
            {
                "job": job,
                "name": about[job][1],
                "user": about[job][0],
                "card_hours": _hours(used),
                "borrowed_card_hours": _hours(lent),
            }
            for job, (used, lent) in largest[:top]
        ],
        "jobs_left_out": max(0, len(largest) - top),
    }


def descendants(tenant: str, parents: dict[str, str | None]) -> list[str]:
    """Every tenant below ``tenant`` (children, their children, ...), by name."""
    below: list[str] = []
    frontier = [tenant]
    while frontier:
        kids = sorted(t for t, parent in parents.items() if parent in frontier)
        below += kids
        frontier = kids
    return sorted(below)


def sub_teams(tenant: str, parents: dict[str, str | None], bodies: dict[str, dict]) -> list[dict]:
    """A parent's sub-teams as its invoice lists them: each one's card-hours and total (from
    their own invoices, which bill them; the parent's total does not include them)."""
    out = []
    for team in descendants(tenant, parents):
        body = bodies.get(team)
        if body is None:
            continue
        out.append(
            {
                "tenant": team,
                "parent": parents.get(team),
                "card_hours": (body.get("breakdown") or {}).get("card_hours", "0.0000"),
                "total": body["total"],
            }
        )
    return out
