"""What every route needs: the server context, the caller, and role checks."""

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gpupool.server.admission import LimitCache
from gpupool.server.auth import REFUSED, Principal, Role, principal_for, refusal_for, token_hash
from gpupool.server.cache import TtlCache
from gpupool.server.capacity import PoolCapacity
from gpupool.server.change_feed import ChangeFeed, read_digests, read_stamp
from gpupool.server.client_address import client_address
from gpupool.server.client_certs import agent_refusal
from gpupool.server.db.engine import Database
from gpupool.server.db.notify import ChangeListener
from gpupool.server.errors import ApiError, forbidden
from gpupool.server.group_commit import GroupCommit
from gpupool.server.heartbeats import BeatBatcher
from gpupool.server.interactive.activity import InputStamps
from gpupool.server.loop import SchedulerLoop
from gpupool.server.metrics import Metrics
from gpupool.server.ratelimit import FailedAuthLimiter, Pace
from gpupool.server.session import SESSION_COOKIE, check_csrf
from gpupool.server.settings import Settings
from gpupool.server.tunnels import TunnelHub

bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer gp_...`")


MONTH_COST_TTL_S = 5.0  # the overview refreshes every 5 s
FAIR_VIEW_TTL_S = 30.0  # the leader re-reads the usage history once a minute


@dataclass
class ServerContext:
    settings: Settings
    db: Database
    metrics: Metrics
    loop: SchedulerLoop
    writes: GroupCommit
    principals: TtlCache[str, Principal] = field(default_factory=lambda: TtlCache(2.0))
    names: TtlCache[tuple[str, str], bool] = field(default_factory=lambda: TtlCache(5.0))
    # a bad token seen recently -> why it is refused (the 401's words)
    bad_tokens: TtlCache[str, str] = field(default_factory=lambda: TtlCache(2.0))
    auth_failures: FailedAuthLimiter = field(init=False)
    # terminals a user may open: each start costs its node ~0.1 s of CPU before the
    # terminal's process joins the job's cgroup
    terminal_opens: Pace = field(default_factory=lambda: Pace(rate=2.0, burst=20))
    capacity: PoolCapacity = field(default_factory=PoolCapacity)  # jobs that can never run
    # the dashboard's month-to-date cost per set of visible tenants (invoices are not free),
    # kept as long as the overview waits between refreshes (it lagged the billing page by a
    # minute when kept 60 s, issue 59)
    month_costs: TtlCache[tuple, dict] = field(default_factory=lambda: TtlCache(MONTH_COST_TTL_S))
    changes: ChangeFeed = field(init=False)  # wakes agents waiting for new orders
    beats: BeatBatcher = field(init=False)  # agents' beats on their channels, written together
    limits: LimitCache = field(init=False)  # tenants' admission limits (the loop's own)
    tunnels: TunnelHub = field(init=False)  # interactive sessions' links (server.tunnels)
    session_input: InputStamps = field(init=False)  # people's input, for idle culling
    # fair share as sshare/sprio and the Teams page show it: the usage history of every
    # tenant is read for it, so one reading serves every caller for a while
    fair_views: TtlCache[str, Any] = field(default_factory=lambda: TtlCache(FAIR_VIEW_TTL_S))
    fair_view_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.changes = ChangeFeed(
            lambda: read_stamp(self.db),
            lambda: read_digests(self.db),
            self.settings.orders_change_poll_s,
            None if self.db.is_sqlite else ChangeListener(self.db.engine),
        )
        self.beats = BeatBatcher(self.writes, self.settings.beat_flush_s, self.loop.wake, time.time,
                                 self.settings.agent_lag_max_s)  # fmt: skip
        self.limits = self.loop.limits
        self.tunnels = TunnelHub(self.settings.data_dir)
        self.session_input = InputStamps(self.db, self.settings.session_input_stamp_s)
        self.auth_failures = FailedAuthLimiter(
            self.settings.auth_failure_limit, self.settings.auth_failure_window_s
        )

    def forget_principals(self) -> None:
        """After a change of tokens or of the tenant tree."""
        self.principals.clear()
        self.bad_tokens.clear()


async def context(request: Request) -> ServerContext:
    """Async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a hop
    that cost about a tenth of a submission's CPU (``gpupool bench api``, profiled)."""
    return request.app.state.ctx


def lookup_principal(db: Database, token: str) -> Principal | None:
    with db.read() as s:
        return principal_for(s, token)


def lookup_principal_or_why(db: Database, token: str) -> tuple[Principal | None, str]:
    """The token's principal, or None and why it is refused (``auth.refusal_for``)."""
    with db.read() as s:
        who = principal_for(s, token)
        return who, "" if who is not None else refusal_for(s, token)


async def authenticate(request: Request, creds: HTTPAuthorizationCredentials | None) -> Principal:
    """The principal of the request's bearer token, or else of its dashboard session cookie
    (whose changes need the page's CSRF header). Async so that a cached token costs no hop
    to the thread pool; a miss reads the database in a worker thread.

    A valid token always gets through. Only failures count: an address that keeps presenting
    bad tokens is answered 429 for a while (``gpupool.server.ratelimit``) — so a job that
    hammers the API with garbage slows down itself, never the agents or users beside it on the
    same address. A bad token seen recently is refused from memory (no database read)."""
    if creds is not None and creds.credentials:
        token = creds.credentials
    else:
        token = request.cookies.get(SESSION_COOKIE, "")
        if not token:
            raise ApiError(401, "missing bearer token (Authorization: Bearer <token>)")
        check_csrf(request, token)
    ctx: ServerContext = request.app.state.ctx
    now = time.time()
    who = await principal_of(ctx, token, now)
    if who is None:
        address = client_address(request)
        throttle(ctx, address, now)
        ctx.auth_failures.failed(address, now)
        raise ApiError(401, ctx.bad_tokens.get(token_hash(token)) or REFUSED)
    if who.role is Role.AGENT and ctx.settings.tls_client_ca_file is not None:
        refused = agent_refusal(request.scope.get("state") or {}, who.node)
        if refused is not None:
            raise forbidden(refused)
    request.state.principal = who
    return who


def throttle(ctx: ServerContext, address: str, now: float) -> None:
    """429 for an address that kept presenting bad tokens (``gpupool.server.ratelimit``)."""
    wait = ctx.auth_failures.retry_after(address, now)
    if wait is not None:
        after = max(1, math.ceil(wait))  # never "retry in 0 s"
        raise ApiError(
            429,
            f"too many failed authentications from {address}; retry in {after} s",
            headers={"Retry-After": str(after)},
        )


async def principal_of(ctx: ServerContext, token: str, now: float) -> Principal | None:
    """The principal of a token (bearer or session), from the few-seconds cache or, on a
    miss, the database in a worker thread; None if unknown, revoked, expired or disabled
    (remembered for a few seconds too, so repeating a bad token costs no read)."""
    key = token_hash(token)
    who = ctx.principals.get(key)
    if who is not None and who.expires_at is not None and who.expires_at <= now:
        who = None
        ctx.principals.clear()
    if who is None:
        if ctx.bad_tokens.get(key):
            return None
        who, why = await run_in_threadpool(lookup_principal_or_why, ctx.db, token)
        if who is not None:
            ctx.principals.put(key, who)
        else:
            ctx.bad_tokens.put(key, why or REFUSED)
    return who


async def caller(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The caller of an API route (a metrics token reads /metrics only)."""
    who = await authenticate(request, creds)
    if who.role is Role.METRICS:
        raise forbidden("metrics tokens only read /metrics")
    if who.role is Role.KUBERNETES:
        raise forbidden("kubernetes tokens only reach /api/v1/kubernetes")
    return who


async def kube_caller(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The caller of a Kubernetes-mirror route: the kubernetes role, or an admin."""
    who = await authenticate(request, creds)
    if who.role not in (Role.KUBERNETES, Role.ADMIN):
        raise forbidden(
            f"mirroring a Kubernetes cluster needs role kubernetes; {who.user} is {who.role}"
        )
    return who


Ctx = Annotated[ServerContext, Depends(context)]
Caller = Annotated[Principal, Depends(caller)]
KubeCaller = Annotated[Principal, Depends(kube_caller)]
Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=10**9, description="items to skip")]
MAX_ID = 2**62  # fits a signed 64-bit column on every backend
Id = Annotated[int, Path(ge=1, le=MAX_ID)]


def require(who: Principal, roles: Iterable[Role], doing: str) -> None:
    allowed = tuple(roles)
    if who.role not in allowed:
        names = ", ".join(str(r) for r in allowed)
        raise forbidden(f"{doing} needs role {names}; {who.user} is {who.role}")


def human(who: Principal) -> None:
    if who.role is Role.AGENT:
        raise forbidden("agent tokens only reach node endpoints")


def may_manage(who: Principal, tenant: str, doing: str) -> None:
    """Admins anywhere; tenant-admins in their subtree; members in their own tenant."""
    if who.is_admin:
        return
    if who.role is Role.TENANT_ADMIN and who.sees(tenant):
        return
    if who.role is Role.MEMBER and who.tenant == tenant:
        return
    raise forbidden(f"{who.user} ({who.role}) may not {doing} for tenant {tenant}")


def may_administer(who: Principal, tenant: str, doing: str) -> None:
    """Admins anywhere; tenant-admins strictly below their own tenant (never their own)."""
    if who.is_admin:
        return
    if who.role is Role.TENANT_ADMIN and who.sees(tenant) and tenant != who.tenant:
        return
    raise forbidden(f"{who.user} ({who.role}) may not {doing} for tenant {tenant}")


def agent_for(who: Principal, node: str) -> None:
    """Admins, or the agent whose token is scoped to ``node`` (or to every node)."""
    if who.is_admin:
        return
    if who.role is Role.AGENT and who.node in (node, "*"):
        return
    raise forbidden(f"{who.user} may not act for node {node}")
