"""Nodes and their devices: registration and heartbeats (agents), listing, cordoning."""

import logging
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool import __version__
from gpupool.model.protocol import AllocationOut
from gpupool.model.versions import AGENT_PRODUCT, Skew, judge_skew, version_in
from gpupool.server.auth import Role
from gpupool.server.db.tables import (
    AllocationRow,
    DeviceRow,
    JobRow,
    NodeRow,
    Pool,
)
from gpupool.server.deps import Caller, Ctx, Limit, Offset, ServerContext, agent_for, require
from gpupool.server.errors import ApiError, not_found
from gpupool.server.group_commit import Batch
from gpupool.server.heartbeats import write_heartbeat
from gpupool.server.join import revoke_node_credentials
from gpupool.server.lifecycle import bump_nodes_version, finish, live_on
from gpupool.server.node_registry import devices_of, register_node
from gpupool.server.routes.views import allocation_out, page
from gpupool.server.schemas import (
    AgentNodeOut,
    DeviceOut,
    DrainIn,
    HeartbeatIn,
    NodeIn,
    NodeOut,
    NodePatch,
    Page,
)
from gpupool.server.services.readings import ReadingsIn, record_readings
from gpupool.server.settings import Settings

log = logging.getLogger("gpupool.nodes")
router = APIRouter(prefix="/api/v1", tags=["nodes"])


def node_load(s: Session, names: list[str]) -> dict[str, tuple[set[int], int, int]]:
    """Per node: the devices live allocations hold (any part of), their CPU and memory."""
    out: dict[str, tuple[set[int], int, int]] = {}
    wanted = set(names)
    if not wanted:
        return out
    rows = s.execute(select(AllocationRow.placement).where(AllocationRow.state == "active"))
    for (placement,) in rows:
        for n in placement["nodes"]:
            if n["node"] in wanted:
                held, cpu, mem = out.get(n["node"], (set(), 0, 0))
                held.update(d["device"] for d in n["devices"])
                out[n["node"]] = (held, cpu + n["cpu_millis"], mem + n["mem_mib"])
    return out


def node_out(
    n: NodeRow, devices: list[DeviceRow], load: tuple[set[int], int, int] | None = None
) -> NodeOut:
    held, cpu, mem = load or (set(), 0, 0)
    return NodeOut(
        name=n.name,
        pool=n.pool,
        cpu_millis=n.cpu_millis,
        memory_mib=n.memory_mib,
        labels=dict(n.labels or {}),
        state=n.state,
        schedulable=n.schedulable,
        drain_reason=n.drain_reason or "",
        registered_at=n.registered_at,
        heartbeat_at=n.heartbeat_at,
        source=n.source or "agent",
        agent_version=n.agent_version,
        agent_lag_s=n.agent_lag_s or 0.0,
        devices=[DeviceOut.model_validate(d, from_attributes=True) for d in devices],
        devices_in_use=sorted(held),
        cpu_allocated_millis=cpu,
        mem_allocated_mib=mem,
    )


def lease_terms(settings: Settings) -> dict[str, float]:
    """What an agent hears with every registration and heartbeat, besides its node."""
    return {
        "lease_s": settings.lease_s,
        "fence_kill_s": settings.fence_kill_s,
        "heartbeat_timeout_s": settings.heartbeat_timeout_s,
        "heartbeat_s": settings.heartbeat_advice_s,
    }


def agent_node_out(ctx: ServerContext, node: NodeOut) -> AgentNodeOut:
    return AgentNodeOut(**node.model_dump(), **lease_terms(ctx.settings))


@router.post("/nodes", response_model=AgentNodeOut)
def register(body: NodeIn, ctx: Ctx, who: Caller, request: Request) -> AgentNodeOut:
    """Register a node or update its inventory (idempotent). Agents may only register their
    own node, one agent at a time."""
    agent_for(who, body.name)
    request.state.audit_target = f"node {body.name}"  # a refusal is audited naming it too
    agent_version = version_in(request.headers.get("user-agent"), AGENT_PRODUCT)
    skew = judge_skew(__version__, agent_version)
    if not skew.accepted:
        raise ApiError(409, f"version: {skew.explain()}", "version")
    if skew.skew is Skew.SUPPORTED:
        log.warning("node %s: %s", body.name, skew.explain())
    with ctx.db.write() as s:
        node = register_node(s, body, time.time(), ctx.settings.heartbeat_timeout_s)
        node.agent_version = agent_version
        s.flush()
        out = node_out(node, devices_of(s, [node.name])[node.name])
    ctx.capacity.invalidate()  # the pool may have grown
    ctx.loop.wake()
    return agent_node_out(ctx, out)


@router.get("/nodes", response_model=Page[NodeOut])
def list_nodes(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    pool: Annotated[str | None, Query(max_length=100)] = None,
    state: Annotated[str | None, Query(max_length=20)] = None,
) -> Page[NodeOut]:
    q = select(NodeRow).order_by(NodeRow.name)
    if pool is not None:
        q = q.where(NodeRow.pool == pool)
    if state is not None:
        q = q.where(NodeRow.state == state)
    if who.role is Role.AGENT and who.node != "*":
        q = q.where(NodeRow.name == who.node)
    with ctx.db.read() as s:
        nodes, total = page(s, q, limit, offset)
        names = [n.name for n in nodes]
        devices, load = devices_of(s, names), node_load(s, names)
    items = [node_out(n, devices[n.name], load.get(n.name)) for n in nodes]
    return Page(items=items, total=total, limit=limit, offset=offset)


@router.get("/nodes/{name}", response_model=NodeOut)
def get_node(name: str, ctx: Ctx, who: Caller) -> NodeOut:
    if who.role is Role.AGENT:
        agent_for(who, name)
    with ctx.db.read() as s:
        node = s.get(NodeRow, name)
        if node is None:
            raise not_found(f"node {name}")
        return node_out(node, devices_of(s, [name])[name], node_load(s, [name]).get(name))


@router.patch("/nodes/{name}", response_model=NodeOut)
def patch_node(name: str, body: NodePatch, ctx: Ctx, who: Caller) -> NodeOut:
    """Cordon (``schedulable: false``) or uncordon a node, move it to a pool, relabel it."""
    require(who, (Role.ADMIN,), "changing a node")
    with ctx.db.write() as s:
        node = s.get(NodeRow, name, with_for_update=True)
        if node is None:
            raise not_found(f"node {name}")
        if body.pool is not None and s.get(Pool, body.pool) is None:
            raise ApiError(422, f"pool: unknown pool {body.pool!r}", "pool")
        for field in ("schedulable", "pool", "labels"):
            value = getattr(body, field)
            if value is not None:
                setattr(node, field, value)
        if body.schedulable:
            node.drain_reason = ""
        bump_nodes_version(s)
        out = node_out(node, devices_of(s, [name])[name])
    ctx.loop.wake()
    return out


@router.post("/nodes/{name}/drain", response_model=NodeOut)
def drain(name: str, body: DrainIn, ctx: Ctx, who: Caller, request: Request) -> NodeOut:
    """Take no new work on a node (sinfo shows it drained, with the reason). The jobs running
    there finish, or with ``now`` are requeued at once (their agent stops them)."""
    require(who, (Role.ADMIN,), "draining a node")
    now = time.time()
    with ctx.db.write() as s:
        node = s.get(NodeRow, name, with_for_update=True)
        if node is None:
            raise not_found(f"node {name}")
        node.schedulable = False
        node.drain_reason = body.reason or f"drained by {who.user}"
        requeued = []
        if body.now:
            for job_id in s.execute(live_on(select(AllocationRow.job_id), name)).scalars():
                job = s.get_one(JobRow, job_id, with_for_update=True)
                why = f"requeued: node {name} drained by {who.user}"
                finish(s, job, "pending", now, why, who.user)
                requeued.append(job_id)
        bump_nodes_version(s)
        out = node_out(node, devices_of(s, [name])[name])
    request.state.audit_target = f"node {name}"
    if requeued:
        request.state.audit_detail = f"requeued jobs {requeued}"
    ctx.loop.wake()
    return out


@router.delete("/nodes/{name}", status_code=204)
def remove_node(name: str, ctx: Ctx, who: Caller, revoke: bool = False) -> None:
    """Forget a node that runs nothing. Its agent, still running, registers it again (a reset
    of its record) unless ``revoke``: then every token of the agents scoped to it is revoked
    too (gpupool node remove), and it comes back only by joining again."""
    require(who, (Role.ADMIN,), "removing a node")
    with ctx.db.write() as s:
        if s.get(NodeRow, name) is None:
            raise not_found(f"node {name}")
        live = s.execute(live_on(select(AllocationRow.id), name).limit(1)).first()
        if live is not None:
            raise ApiError(409, f"node {name} still holds live allocations; cordon and drain it")
        s.execute(delete(DeviceRow).where(DeviceRow.node == name))
        s.execute(delete(NodeRow).where(NodeRow.name == name))
        bump_nodes_version(s)
        if revoke:
            revoke_node_credentials(s, name)
    if revoke:
        ctx.forget_principals()
    ctx.capacity.invalidate()  # the pool shrank
    ctx.loop.wake()


@router.post("/nodes/{name}/heartbeat", response_model=AgentNodeOut)
async def heartbeat(name: str, body: HeartbeatIn, ctx: Ctx, who: Caller) -> AgentNodeOut:
    """Telemetry per device; a change of health reaches the scheduler's next cycle. A lost
    node that heartbeats again is fenced until its agent reconciles. Written through the group
    commit: concurrent heartbeats (and submissions) share one transaction and one commit."""
    agent_for(who, name)
    now = time.time()

    def write(b: Batch) -> tuple[bool, NodeOut]:
        changed, node, devices = write_heartbeat(b, name, body.devices, now)
        return changed, node_out(node, devices)

    health_changed, out = await ctx.writes.run(write, wake=False)
    if health_changed:
        ctx.loop.wake()
    return agent_node_out(ctx, out)


@router.post("/nodes/{name}/readings", status_code=204)
async def replica_readings(name: str, body: ReadingsIn, ctx: Ctx, who: Caller) -> None:
    """What the node's agent found looking at its service replicas on their control ports
    (only it reaches them): health, load, sleep, and faults it handled. Readings of
    allocations not live on this node are dropped."""
    agent_for(who, name)
    now = time.time()

    def write(b: Batch) -> int:
        return record_readings(b.session, name, body.readings, now)

    await ctx.writes.run(write, wake=False)


@router.get("/nodes/{name}/allocations", response_model=list[AllocationOut])
def node_allocations(name: str, ctx: Ctx, who: Caller) -> list[AllocationOut]:
    """The allocations a node's agent must run now (its desired state)."""
    agent_for(who, name)
    with ctx.db.read() as s:
        if s.get(NodeRow, name) is None:
            raise not_found(f"node {name}")
        rows = s.execute(live_on(select(AllocationRow), name).order_by(AllocationRow.id)).scalars()
        return [allocation_out(a) for a in rows]
