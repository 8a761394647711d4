"""What agents call besides registration and heartbeats: their node's desired state (orders)
and reconciliation after a restart or a lost period."""

import hashlib
import time
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from gpupool.server.change_feed import node_digest
from gpupool.server.db.tables import AllocationRow, DeviceRow, JobRow, Meta, NodeRow
from gpupool.server.deps import Caller, Ctx, ServerContext, agent_for
from gpupool.server.errors import not_found
from gpupool.server.lifecycle import live_on
from gpupool.server.liveness import heard_from, reconcile
from gpupool.server.routes.views import allocation_out
from gpupool.server.schemas import OrderOut, OrdersOut, ReconcileIn, ReconcileOut
from gpupool.server.services.replicas import replica_ports

router = APIRouter(prefix="/api/v1", tags=["agents"])


@router.get("/nodes/{name}/orders", response_model=OrdersOut)
async def orders(
    name: str,
    ctx: Ctx,
    who: Caller,
    wait: Annotated[float, Query(ge=0, le=300, description="seconds the answer may wait")] = 0,
    known: Annotated[str | None, Query(max_length=64, description="the last etag")] = None,
) -> OrdersOut:
    """The allocations this node must run now, with their jobs' commands. With ``wait`` and
    the ``etag`` of the agent's last answer as ``known``, the answer waits until the orders
    differ from that one, or ``wait`` seconds (at most the server's ``orders_max_wait_s``):
    a long poll, so an idle node costs one request per wait, not one per second. An agent that
    sends neither (older agents) gets the answer at once."""
    agent_for(who, name)
    limit = min(wait, ctx.settings.orders_max_wait_s)
    deadline = time.monotonic() + limit
    if limit > 0 and known is not None and not ctx.changes.started:
        await run_in_threadpool(ctx.changes.start)  # its first reads, off the event loop
    while True:
        epoch = ctx.changes.epoch
        out, digest = await run_in_threadpool(_orders, ctx, name)
        left = deadline - time.monotonic()
        waits = limit > 0 and known is not None and not ctx.changes.stopped
        if not waits or out.etag != known or left <= 0:  # stopped: the server is going away
            return out
        if not await ctx.changes.changed(name, digest, epoch, left):
            # the wait ran out and no change was seen: the same answer again, not read again
            # (a change the feed has not read yet reaches the agent's next request at once)
            return out


def _orders(ctx: ServerContext, name: str) -> tuple[OrdersOut, int]:
    """The node's orders, and the ``node_digest`` of the state they were read from."""
    with ctx.db.read() as s:
        node = s.get(NodeRow, name)
        if node is None:
            raise not_found(f"node {name}")
        generation = s.execute(select(Meta.generation).where(Meta.id == 1)).scalar_one()
        rows = s.execute(
            live_on(select(AllocationRow, JobRow), name)
            .join(JobRow, JobRow.id == AllocationRow.job_id)
            .order_by(AllocationRow.id)
        ).all()
        jobs = [j.id for _, j in rows] + [j.replaces for _, j in rows if j.replaces]
        ports = replica_ports(s, jobs)
        out = [
            OrderOut(
                **allocation_out(a).model_dump(),
                job_name=j.name,
                job_state=j.state,
                on_lost=j.on_lost,
                command=list(j.command or []),
                env=dict(j.env or {}),
                image=j.image,
                max_runtime_s=j.max_runtime_s,
                output=j.output,
                error=j.error,
                chdir=j.chdir,
                submit_dir=j.submit_dir,
                submitted_by=j.submitted_by,
                array_job=j.array_job,
                array_index=j.array_index,
                replica_port=ports.get(j.id) or ports.get(j.replaces or 0),
            )
            for a, j in rows
        ]
        modes = s.execute(
            select(DeviceRow.index, DeviceRow.want_mode).where(
                DeviceRow.node == name, DeviceRow.want_mode.is_not(None)
            )
        ).all()
        answer = OrdersOut(
            generation=generation, node_state=node.state, orders=out, modes={i: m for i, m in modes}
        )
        digest = node_digest(
            ((a.id, a.generation, j.state) for a, j in rows), node.state, answer.modes.items()
        )
    if ctx.settings.orders_max_wait_s > 0:  # a server that answers at once gives none
        content = answer.model_dump_json(exclude={"generation", "etag"}).encode()
        answer.etag = hashlib.sha256(content).hexdigest()[:32]
    return answer, digest


@router.post("/nodes/{name}/reconcile", response_model=ReconcileOut)
def reconcile_node(name: str, body: ReconcileIn, ctx: Ctx, who: Caller) -> ReconcileOut:
    """The agent lists the allocations it still runs; the answer lists those it must stop.
    A fenced node whose list holds nothing stale is ready for new work again."""
    agent_for(who, name)
    with ctx.db.write() as s:
        node = s.get(NodeRow, name, with_for_update=True)
        if node is None:
            raise not_found(f"node {name}")
        heard_from(s, node, time.time())
        stop = reconcile(s, node, set(body.running))
        state = node.state
    if state == "ready":
        ctx.loop.wake()
    return ReconcileOut(stop=stop, state=state)
