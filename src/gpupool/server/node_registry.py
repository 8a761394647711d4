"""Registering a node and its devices: the agents' path (``POST /api/v1/nodes``) and the
Kubernetes mirror's. The scheduler's snapshot is rebuilt only when capacity, devices or
topology changed."""

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.codec import device_fields
from gpupool.server.db.tables import DeviceRow, NodeRow, Pool
from gpupool.server.errors import ApiError
from gpupool.server.lifecycle import bump_nodes_version, held_devices
from gpupool.server.liveness import heard_from
from gpupool.server.pool_modes import shares
from gpupool.server.schemas import NodeIn

log = logging.getLogger("gpupool.nodes")
TOPOLOGY = ("model", "vendor", "memory_mib", "uuid", "healthy", "mode", "island", "pcie_switch")


def devices_of(s: Session, names: list[str]) -> dict[str, list[DeviceRow]]:
    out: dict[str, list[DeviceRow]] = {n: [] for n in names}
    if names:
        q = select(DeviceRow).where(DeviceRow.node.in_(names)).order_by(DeviceRow.index)
        for d in s.execute(q).scalars():
            out[d.node].append(d)
    return out


def one_agent(node: NodeRow, instance: str | None, now: float, within_s: float) -> None:
    """A node runs one agent's work: another agent presenting its name and token while the
    one it knows is still heard (a cloned host, a second agent started by mistake) is refused
    — two agents would run its work twice at once. Once that one has been silent for the
    node-lost timeout the new one takes over (a replaced host)."""
    if instance is None:  # an older agent, or a node registered by an admin
        return
    silent = now - node.heartbeat_at
    if node.instance not in (None, instance) and silent < within_s and node.state != "lost":
        held = {"node": node.name, "instance": instance, "holder": node.instance}
        log.warning("refused a second agent for node %s", node.name, extra=held)
        raise ApiError(
            409,
            f"node {node.name} is run by another agent (instance {node.instance}, heard "
            f"{silent:.0f} s ago): two agents would run its work twice; stop the other one, "
            f"or register once it has been silent {within_s:.0f} s",
            "instance",
        )
    node.instance = instance


def register_node(
    s: Session, body: NodeIn, now: float, heard_within_s: float | None = None
) -> NodeRow:
    """Insert or update a node and its devices; the scheduler's snapshot is rebuilt only if
    capacity, devices or topology changed. ``heard_within_s``: an agent of another
    ``instance`` than the one heard from within that long is refused (409)."""
    pool = s.get(Pool, body.pool)
    if pool is None:
        raise ApiError(422, f"pool: unknown pool {body.pool!r}", "pool")
    indexes = [d.index for d in body.devices]
    if len(set(indexes)) != len(indexes):
        raise ApiError(422, "devices: duplicate device index", "devices")
    wanted = {d.index: device_fields(d.model_dump()) for d in body.devices}
    for fields in wanted.values():  # as the pool cuts its cards (pool_modes.shares)
        if fields["mode"] == "whole" and shares(pool.sharing, fields["model"]):
            fields["mode"] = "share"
    node = s.get(NodeRow, body.name, with_for_update=True)
    if node is not None and heard_within_s is not None:
        one_agent(node, body.instance, now, heard_within_s)
    changed = node is None
    if node is None:
        node = NodeRow(
            name=body.name,
            pool=body.pool,
            cpu_millis=body.cpu_millis,
            memory_mib=body.memory_mib,
            labels=body.labels,
            registered_at=now,
            heartbeat_at=now,
            instance=body.instance,
        )
        s.add(node)
    else:
        before = (node.pool, node.cpu_millis, node.memory_mib, node.labels)
        node.pool, node.cpu_millis, node.memory_mib = body.pool, body.cpu_millis, body.memory_mib
        node.labels = body.labels
        fenced = heard_from(s, node, now)
        changed = fenced or before != (node.pool, node.cpu_millis, node.memory_mib, node.labels)
    s.flush()
    current = {d.index: d for d in devices_of(s, [body.name])[body.name]}
    held = {i for _, i in held_devices(s, body.name)}
    for index, d in current.items():
        if index in wanted:
            continue
        if index in held:  # gone from the inventory while a job holds it: keep it, unhealthy
            if d.healthy:
                d.healthy = False
                changed = True
            continue
        s.delete(d)
        changed = True
    for index, fields in wanted.items():
        row = current.get(index)
        if row is None:
            s.add(DeviceRow(node=body.name, **fields))
            changed = True
        elif any(getattr(row, k) != fields[k] for k in TOPOLOGY):
            for k in TOPOLOGY:
                setattr(row, k, fields[k])
            changed = True
    if changed:
        bump_nodes_version(s)
    return node
