"""The API's reservations: what is asked, and what a reservation is and will do."""

from pydantic import BaseModel, Field, model_validator

from gpupool.server.schemas import NodeName, Strict, TenantName


class ReservationIn(Strict):
    tenant: TenantName
    # the nodes held whole; with cards, the nodes the cards are held on (default: the fewest
    # nodes of model that have them)
    nodes: list[NodeName] | None = Field(None, min_length=1, max_length=10000)
    cards: int | None = Field(None, ge=1, le=1_000_000)  # hold N cards, not whole nodes
    model: str | None = Field(None, min_length=1, max_length=100)  # the cards' model
    start: float = Field(ge=0, le=1e11)  # epoch seconds
    end: float = Field(ge=0, le=1e11)
    # say what it would do (the plan), create nothing (answered 200, without an id)
    dry_run: bool = False
    # create it even though it leaves online work (a service) without a place: stopped
    allow_outage: bool = False

    @model_validator(mode="after")
    def _what(self) -> "ReservationIn":
        if self.nodes is None and self.cards is None:
            raise ValueError("give nodes (whole nodes), or cards and model (N cards of a model)")
        if self.nodes is None and self.model is None:
            raise ValueError("cards without nodes needs model: which cards to hold")
        if self.model is not None and self.cards is None:
            raise ValueError("model goes with cards")
        return self


class PlannedJob(BaseModel):
    job_id: int
    tenant: str
    service: str | None = None  # the service it is a replica of


class PlannedMove(PlannedJob):
    to: list[str]  # the nodes its copy starts on


class PlannedStrand(PlannedJob):
    at: float  # when it would be stopped with nowhere to go (epoch seconds)
    by: str  # the reservation whose window begins then (r-N)
    own: bool  # when this reservation begins (else: another, during its window)
    why: str


class ReservationPlanOut(BaseModel):
    """What the reservation does when its window begins, as things are now."""

    stops: list[PlannedJob] = Field(default_factory=list)  # stopped (requeued or killed)
    moves: list[PlannedMove] = Field(default_factory=list)  # copied elsewhere, then stopped
    stranded: list[PlannedStrand] = Field(default_factory=list)  # online work left no place
    hidden: int = 0  # jobs of tenants the reader may not see, left out above


class ReservationOut(BaseModel):
    id: int | None  # None: a dry run, nothing created
    tenant: str
    nodes: list[str]
    cards: int | None = None  # N of its nodes' cards held (None: the whole nodes)
    start: float
    end: float
    start_iso: str
    end_iso: str
    created_by: str
    # on creation: the running jobs it will stop when its window begins (others' work on its
    # nodes that will not have ended by then)
    displaces: list[int] = Field(default_factory=list)
    dry_run: bool = False
    # what it does when its window begins (a reservation not yet begun, or on creation)
    plan: ReservationPlanOut | None = None
    status: str = ""  # in words: ahead or on, what it keeps off its nodes meanwhile
