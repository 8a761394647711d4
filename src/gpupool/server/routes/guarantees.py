"""Guarantees against what is above them, over the whole tenant tree (``server.overbooking``):
the levels where they overbook a parent's guarantee or the pool, for the Teams page and
``gpupool tenants``. Setting or deleting a quota answers with the levels it takes part in
(``routes/tenants.py``)."""

from collections.abc import Callable

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpupool.scheduler.tenants import CARD
from gpupool.server.codec import quota_from_engine
from gpupool.server.db.tables import DeviceRow, NodeRow, QuotaRow, TenantRow
from gpupool.server.deps import Caller, Ctx, human
from gpupool.server.overbooking import Overbooking, overbookings

router = APIRouter(prefix="/api/v1", tags=["tenants"])


class Guaranteed(BaseModel):
    tenant: str
    guarantee: float  # in the resource's units: cards, cores, MiB


class OverbookingOut(BaseModel):
    resource: str
    over: str | None  # the tenant whose guarantee is exceeded; null: the pool
    limit: float  # its guarantee, or what the pool holds
    members: list[Guaranteed]  # the nearest guarantees below it that the reader sees
    others: float  # the guarantees of members the reader may not see, summed
    total: float
    message: str


class OverbookingPage(BaseModel):
    items: list[OverbookingOut]


class Level:
    """One resource's guarantees, the tree and the pool's capacity, read once."""

    def __init__(self, s: Session, resource: str):
        self.resource = resource
        self.parents: dict[str, str | None] = {
            name: parent for name, parent in s.execute(select(TenantRow.name, TenantRow.parent))
        }
        guarantees = select(QuotaRow.tenant, QuotaRow.nominal).where(QuotaRow.resource == resource)
        self.nominal: dict[str, int] = {name: value for name, value in s.execute(guarantees)}
        self.capacity = _capacity(s, resource)

    def shown(self, value: int) -> str:
        amount = quota_from_engine(self.resource, value) or 0.0
        unit = {"cpu": " cores", "gpu_mem": " MiB"}.get(self.resource, " cards")
        return f"{amount:g}{unit}"

    def found(self) -> list[Overbooking]:
        return overbookings(self.resource, self.parents, self.nominal, self.capacity)


def _capacity(s: Session, resource: str) -> int:
    """What the pool holds of ``resource``, in the engine's units."""
    if resource == "cpu":
        total = s.execute(select(func.coalesce(func.sum(NodeRow.cpu_millis), 0))).scalar_one()
    elif resource == "gpu_mem":
        total = s.execute(select(func.coalesce(func.sum(DeviceRow.memory_mib), 0))).scalar_one()
    else:
        cards = select(func.count()).select_from(DeviceRow)
        if resource.startswith("gpu:"):
            cards = cards.where(DeviceRow.model == resource.removeprefix("gpu:"))
        total = s.execute(cards).scalar_one() * CARD
    return int(total)


def overbooking_out(o: Overbooking, level: Level, sees: Callable[[str], bool]) -> OverbookingOut:
    def amount(value: int) -> float:
        return quota_from_engine(o.resource, value) or 0.0

    named = [(t, n) for t, n in o.members if sees(t)]
    return OverbookingOut(
        resource=o.resource,
        over=o.over,
        limit=amount(o.limit),
        members=[Guaranteed(tenant=t, guarantee=amount(n)) for t, n in named],
        others=amount(o.total - sum(n for _, n in named)),
        total=amount(o.total),
        message=o.words(level.shown, sees),
    )


@router.get("/overbooking", response_model=OverbookingPage)
def list_overbooking(ctx: Ctx, who: Caller) -> OverbookingPage:
    """Every level of the tenant tree whose guarantees exceed what is above them (a parent's
    guarantee, or the pool at the top of a branch), every resource with a guarantee: those
    the caller takes part in — a level over a tenant it sees, or with a member it sees;
    members it may not see are summed as ``others``."""
    human(who)
    items = []
    with ctx.db.read() as s:
        resources = s.execute(select(QuotaRow.resource).distinct()).scalars().all()
        for resource in sorted(resources):
            level = Level(s, resource)
            for o in level.found():
                mine = (o.over is not None and who.sees(o.over)) or any(
                    who.sees(t) for t, _ in o.members
                )
                if mine:
                    items.append(overbooking_out(o, level, who.sees))
    return OverbookingPage(items=items)
