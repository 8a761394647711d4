"""Ascend vNPUs on the node: the scheduler grants a template on a chip (vNPUs have no
position, so every grant says slot 0); before the workload starts, the agent binds each grant
to one vNPU of that template no other workload holds — creating it through ``npu-smi`` when
there is none, after destroying idle vNPUs of other templates that leave it no room. The
grant then names the vNPU's slot, which is how the runtime environment finds its id."""

from collections.abc import Iterable
from dataclasses import replace

from gpupool.agent.mig_layout import MigLayoutError
from gpupool.devices.base import DiscoveryError, VnpuMaker
from gpupool.devices.detect import Located
from gpupool.model import SpecError
from gpupool.sharing.runtime_env import Grant, LocalDevice
from gpupool.sharing.vnpu import VNPU_TABLES, VnpuTable


def _fits(table: VnpuTable, names: list[str]) -> bool:
    return table.holds([n for n in names if table.has(n)])


def bind_vnpus(
    grants: Iterable[Grant],
    local: dict[int, LocalDevice],
    located: dict[int, Located],
    busy: set[str],
    stopping: frozenset[str] | set[str] = frozenset(),
) -> list[Grant] | None:
    """``grants`` with each vNPU grant bound to a vNPU (its slot in ``mig_start``); ``local``
    is updated in place with what was created or destroyed. ``busy``: vNPU ids (``vnpu<ID>``)
    workloads hold; ``stopping``: those of workloads released but still stopping — None (try
    again next round) when the room a grant needs is theirs."""
    taken = set(busy)
    out: list[Grant] = []
    for g in grants:
        loc = located.get(g.device)
        table = VNPU_TABLES.get(loc.device.model) if loc is not None else None
        if g.mig_profile is None or table is None or loc is None:
            out.append(g)
            continue
        dev = local[g.device]
        free = [m for m in dev.mig if m[0] == g.mig_profile and m[2] not in taken]
        if free:
            slot, uuid = free[0][1], free[0][2]
        elif _fits(table, [m[0] for m in dev.mig if m[2] in taken] + [g.mig_profile]) or not (
            {m[2] for m in dev.mig} & set(stopping)
        ):
            slot, uuid = _create(g, table, dev, loc, local, taken)
        else:
            return None  # the scheduler granted what a stopping workload still holds
        taken.add(uuid)
        out.append(replace(g, mig_start=slot))
    return out


def _create(
    g: Grant,
    table: VnpuTable,
    dev: LocalDevice,
    loc: Located,
    local: dict[int, LocalDevice],
    taken: set[str],
) -> tuple[int | None, str]:
    template = str(g.mig_profile)
    backend = loc.backend
    if not isinstance(backend, VnpuMaker):
        raise MigLayoutError(
            f"device {g.device}: no free vNPU {template} and the "
            f"{getattr(backend, 'name', 'device')} backend cannot create one"
        )
    kept = [m for m in dev.mig if m[2] in taken]
    idle = [m for m in dev.mig if m[2] not in taken]
    index = loc.device.local_index
    try:
        while idle and not _fits(table, [m[0] for m in kept + idle] + [template]):
            victim = idle.pop()
            backend.destroy_vnpu(index, victim[2])
        if not _fits(table, [m[0] for m in kept + idle] + [template]):
            raise MigLayoutError(
                f"device {g.device}: vNPUs in use leave no room for {template} on this chip"
            )
        made = backend.create_vnpu(index, template)
    except (DiscoveryError, SpecError) as exc:  # npu-smi's refusal / the simulated one
        raise MigLayoutError(f"device {g.device}: {exc}") from None
    finally:
        local[g.device] = replace(dev, mig=tuple(kept + idle))
    mig = (*local[g.device].mig, (made.profile, made.start, made.uuid))
    local[g.device] = replace(dev, mig=mig)
    return made.start, made.uuid
