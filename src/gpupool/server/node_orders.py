"""A node's orders (what ``GET /nodes/{name}/orders`` answers) and how they are watched: read
now, then again whenever the change feed says they may differ. The long poll answers with the
first read that differs from the agent's ``etag``; the agent's channel pushes every read whose
``node_digest`` moved."""

import hashlib
import time
from collections.abc import AsyncGenerator

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from gpupool.model.protocol import OrderOut, OrdersOut
from gpupool.server.change_feed import digest_part, node_digest
from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    DeviceRow,
    JobRow,
    Meta,
    NodeRow,
)
from gpupool.server.deps import ServerContext
from gpupool.server.errors import not_found
from gpupool.server.lifecycle import live_on
from gpupool.server.routes.views import allocation_out
from gpupool.server.services.replicas import parked_replicas, replica_jobs


async def watch_orders(
    ctx: ServerContext, name: str, wait_s: float, *, forever: bool = False
) -> AsyncGenerator[tuple[OrdersOut, int], None]:
    """The node's orders and their digest now, then after every sign of a change until
    ``wait_s`` passes without one (``forever``: a read every ``wait_s`` at least, changed or
    not, until the server stops). Raises ``not_found`` for a node unknown."""
    if wait_s > 0 and not ctx.changes.started:
        await run_in_threadpool(ctx.changes.start)  # its first reads, off the event loop
    deadline = time.monotonic() + wait_s
    while True:
        epoch = ctx.changes.epoch
        out, digest = await run_in_threadpool(read_orders, ctx, name)
        yield out, digest
        left = wait_s if forever else deadline - time.monotonic()
        if ctx.changes.stopped or left <= 0:  # stopped: the server is going away
            return
        if not await ctx.changes.changed(name, digest, epoch, left) and not forever:
            # the wait ran out and no change was seen: nothing read again (a change the feed
            # has not read yet reaches the agent's next request at once)
            return


def read_orders(ctx: ServerContext, name: str) -> tuple[OrdersOut, int]:
    """The node's orders, and the ``node_digest`` of the state they were read from."""
    with ctx.db.read() as s:
        node = s.get(NodeRow, name)
        if node is None:
            raise not_found(f"node {name}")
        generation, restore_epoch = s.execute(
            select(Meta.generation, Meta.restore_epoch).where(Meta.id == 1)
        ).one()
        parts = (AllocationNodeRow.started_at, AllocationNodeRow.ended_at)
        rows = s.execute(
            live_on(select(AllocationRow, JobRow, *parts), name)
            .join(JobRow, JobRow.id == AllocationRow.job_id)
            .order_by(AllocationRow.id)
        ).all()
        jobs = [j.id for _, j, *_ in rows] + [j.replaces for _, j, *_ in rows if j.replaces]
        replicas = replica_jobs(s, jobs)
        asleep = parked_replicas(s, jobs)
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
                replica=j.id in replicas or (j.replaces or 0) in replicas,
                probe=replicas.get(j.id) or replicas.get(j.replaces or 0),
                parked=j.id in asleep,
                interactive=j.interactive,
                idle_release_at=a.idle_release_at,
                checkpoint=j.checkpoint,
                started_here=started is not None,
                ended_here=ended is not None,
            )
            for a, j, started, ended in rows
        ]
        modes = s.execute(
            select(DeviceRow.index, DeviceRow.want_mode).where(
                DeviceRow.node == name, DeviceRow.want_mode.is_not(None)
            )
        ).all()
        answer = OrdersOut(
            generation=generation,
            restore_epoch=restore_epoch,
            node_state=node.state,
            orders=out,
            modes={i: m for i, m in modes},
        )
        digest = node_digest(
            (digest_part(a.id, a.generation, j.state, a.idle_release_at) for a, j, *_ in rows),
            node.state,
            answer.modes.items(),
        )
    if ctx.settings.orders_max_wait_s > 0:  # a server that answers at once gives none
        content = answer.model_dump_json(exclude={"generation", "etag"}).encode()
        answer.etag = hashlib.sha256(content).hexdigest()[:32]
    return answer, digest
