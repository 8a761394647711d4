"""Dynamic MIG on the node: before a workload starts on MIG slices, the agent makes sure an
instance exists at every granted (profile, start) — destroying the idle instances in the way
and creating the granted one through the device backend (NVML, or the simulated backend).
An instance a running workload uses is never touched: the start is refused instead, and the
scheduler's next grant is made against the layout the heartbeat reports."""

import logging
from collections.abc import Iterable, Iterator

from gpupool.devices.base import MigControl
from gpupool.devices.detect import Located
from gpupool.model import SharingMode
from gpupool.sharing.mig import MigTable, table_for
from gpupool.sharing.runtime_env import Grant, LocalDevice

log = logging.getLogger("gpupool.agent")


class MigLayoutError(Exception):
    """The granted instance cannot be made now (busy instances in the way, or the backend
    refused); the allocation fails with this reason."""


def _overlaps(model: str, a: tuple[str, int | None], b: tuple[str, int]) -> bool:
    table = table_for(model)
    if not isinstance(table, MigTable) or a[1] is None:
        return True
    return bool(table.profile(a[0]).mask(a[1]) & table.profile(b[0]).mask(b[1]))


def _missing(
    grants: Iterable[Grant], local: dict[int, LocalDevice], located: dict[int, Located]
) -> Iterator[tuple[Grant, tuple[str, int], list[tuple[str, int | None, str]]]]:
    """Each MIG grant with no instance at its (profile, start) yet, with the existing
    instances that overlap it."""
    for g in grants:
        if g.mig_profile is None or g.mig_start is None:
            continue
        wanted = (g.mig_profile, g.mig_start)
        dev = local[g.device]
        if any((p, s) == wanted for p, s, _ in dev.mig):
            continue
        model = located[g.device].device.model
        yield g, wanted, [m for m in dev.mig if _overlaps(model, (m[0], m[1]), wanted)]


def in_the_way(
    grants: Iterable[Grant], local: dict[int, LocalDevice], located: dict[int, Located]
) -> set[str]:
    """UUIDs of existing instances that overlap a granted instance not made yet."""
    return {uuid for _, _, in_way in _missing(grants, local, located) for _, _, uuid in in_way}


def ensure_instances(
    grants: Iterable[Grant],
    local: dict[int, LocalDevice],
    located: dict[int, Located],
    busy: set[str],
) -> list[str]:
    """Make every granted MIG instance exist; ``local`` is updated in place. ``busy``: MIG
    UUIDs running workloads use. Returns what was done, for the log and the tests."""
    done: list[str] = []
    for g, (profile, start), in_way in _missing(
        grants, local, located
    ):  # lazily: sees each creation
        dev = local[g.device]
        loc = located[g.device]
        backend = loc.backend
        if not isinstance(backend, MigControl):
            raise MigLayoutError(
                f"device {g.device}: no MIG instance {g.mig_profile} at slice {g.mig_start} and "
                f"the {getattr(backend, 'name', 'device')} backend cannot create one"
            )
        taken = [m for m in in_way if m[2] in busy]
        if taken:
            names = ", ".join(f"{p}@{s}" for p, s, _ in taken)
            raise MigLayoutError(
                f"device {g.device}: {g.mig_profile}@{g.mig_start} overlaps instances in use "
                f"({names})"
            )
        try:
            for p, s, uuid in in_way:
                backend.destroy_mig(loc.device.local_index, uuid)
                done.append(f"destroyed {p}@{s} on device {g.device}")
            made = backend.create_mig(loc.device.local_index, profile, start)
        except Exception as exc:  # NVML or the simulated backend refused: fail this start
            raise MigLayoutError(f"device {g.device}: {exc}") from None
        kept = tuple(m for m in dev.mig if m not in in_way)
        local[g.device] = LocalDevice(
            dev.vendor, dev.local_index, dev.uuid, (*kept, (made.profile, made.start, made.uuid))
        )
        done.append(f"created {made.profile}@{made.start} on device {g.device}")
        log.info("MIG: %s", "; ".join(done[-1 - len(in_way) :]))
    return done


def layouts(local: dict[int, LocalDevice], located: dict[int, Located]) -> dict[int, list]:
    """Each MIG-mode card's instances as ``profile@start``, for the heartbeat."""
    return {
        i: sorted(f"{p}@{s}" for p, s, _ in local[i].mig)
        for i, loc in located.items()
        if loc.device.mode == SharingMode.MIG and i in local
    }
