"""Response bodies of the fair-share routes (sshare, sprio)."""

from pydantic import BaseModel


class ShareOut(BaseModel):
    """One tenant as sshare shows it. ``norm_usage`` and ``level_fs`` compare it with its
    siblings: shown only to callers who see all of them (admins; a team's own sub-teams)."""

    tenant: str
    parent: str | None
    raw_shares: float
    norm_shares: float
    raw_usage: float  # decayed borrowed card-hours of its subtree, present borrowing included
    norm_usage: float | None
    level_fs: float | None  # None also where it has no usage (infinite)
    fairshare: float
    rank: int
    used: float  # all its own card-hours, decayed
    borrowing: float  # cards it borrows now


class SharesOut(BaseModel):
    half_life_h: float
    active: bool  # whether the cycle orders by it (fairshare_half_life_h above 0)
    weight: int  # priority points a factor of 1.0 adds (fairshare_weight)
    items: list[ShareOut]


class PriorityOut(BaseModel):
    """A pending job's priority as sprio splits it."""

    job_id: int
    tenant: str
    user: str
    priority_class: str
    priority: float
    qos: int
    nice: int
    age: float
    fairshare: float


class PrioritiesOut(BaseModel):
    active: bool
    items: list[PriorityOut]
