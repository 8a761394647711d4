"""What agents call besides registration and heartbeats: their node's desired state (orders)
and reconciliation after a restart or a lost period."""

import time
from contextlib import aclosing
from typing import Annotated

from fastapi import APIRouter, Query

from gpupool.model.protocol import OrdersOut
from gpupool.server.db.tables import NodeRow
from gpupool.server.deps import Caller, Ctx, agent_for
from gpupool.server.errors import not_found
from gpupool.server.liveness import heard_from, reconcile
from gpupool.server.node_orders import watch_orders
from gpupool.server.schemas import ReconcileIn, ReconcileOut

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
    wait = min(wait, ctx.settings.orders_max_wait_s) if known is not None else 0.0
    async with aclosing(watch_orders(ctx, name, wait)) as reads:
        async for out, _ in reads:  # at least one
            if out.etag != known:
                break
    return out


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
