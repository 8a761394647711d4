"""What a granted slice becomes at run time: the environment a workload starts with.

Whole cards and MIG instances are isolated by visibility (``CUDA_VISIBLE_DEVICES`` with GPU or
MIG UUIDs; ``ASCEND_RT_VISIBLE_DEVICES``, ``MLU_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES`` for
the other vendors; Ascend vNPUs by id in ``ASCEND_VISIBLE_DEVICES``). Fractional shares also
get limits: MPS's ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` and
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``, and HAMi-core's ``CUDA_DEVICE_MEMORY_LIMIT`` /
``CUDA_DEVICE_SM_LIMIT`` with its library preloaded when the node has it. Pure: the agent
passes what it knows about its devices.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpupool.model import SpecError, Vendor

if TYPE_CHECKING:
    from gpupool.devices.detect import Located

VISIBLE = {
    Vendor.NVIDIA: "CUDA_VISIBLE_DEVICES",
    Vendor.ASCEND: "ASCEND_RT_VISIBLE_DEVICES",
    Vendor.CAMBRICON: "MLU_VISIBLE_DEVICES",
    Vendor.HYGON: "HIP_VISIBLE_DEVICES",
}

ASCEND_VNPUS = "ASCEND_VISIBLE_DEVICES"  # vNPU ids, for Ascend Docker Runtime


@dataclass(frozen=True, slots=True)
class LocalDevice:
    """What the agent knows about one of its devices."""

    vendor: Vendor
    local_index: int
    uuid: str = ""
    mig: tuple[tuple[str, int | None, str], ...] = ()  # (profile, start, MIG UUID)


def local_devices(located: Iterable["Located"]) -> dict[int, LocalDevice]:
    """What a node's agent (or device plugin) knows of each discovered device, by node-wide
    index."""
    return {
        loc.index: LocalDevice(
            loc.device.vendor,
            loc.device.local_index,
            loc.device.uuid,
            tuple((m.profile, m.start, m.uuid) for m in loc.device.mig),
        )
        for loc in located
    }


@dataclass(frozen=True, slots=True)
class Grant:
    """One device of an allocation (the API's ``DeviceGrantOut``)."""

    device: int
    compute_pct: int
    mem_mib: int
    exclusive: bool
    mig_profile: str | None = None
    mig_start: int | None = None

    @property
    def fractional(self) -> bool:
        return not self.exclusive and self.mig_profile is None


def _mig_uuid(grant: Grant, dev: LocalDevice) -> str:
    for profile, start, uuid in dev.mig:
        if profile == grant.mig_profile and (start is None or start == grant.mig_start):
            return uuid
    raise SpecError(
        f"device {grant.device}: no MIG instance {grant.mig_profile} at slice {grant.mig_start}"
        " exists on this node (create it, e.g. nvidia-smi mig -cgi ... -C)",
        field="mig_profile",
    )


def granted_uuid(grant: Grant, dev: LocalDevice) -> str:
    """The UUID the grant's memory is counted under: its MIG instance's, else the card's."""
    return _mig_uuid(grant, dev) if grant.mig_profile is not None else dev.uuid


def slice_env(
    grants: list[Grant], devices: dict[int, LocalDevice], hami_core: str | None = None
) -> dict[str, str]:
    """Environment variables for a workload holding ``grants`` on this node.

    ``devices`` maps the node-wide device index to the agent's view of it; ``hami_core`` is the
    path of ``libvgpu.so`` when the node has HAMi-core.
    """
    env: dict[str, str] = {}
    visible: dict[Vendor, list[str]] = {}
    shares: list[tuple[int, Grant]] = []  # (position among visible NVIDIA devices, grant)
    vnpus: list[str] = []
    for grant in sorted(grants, key=lambda g: g.device):
        dev = devices.get(grant.device)
        if dev is None:
            raise SpecError(f"device {grant.device}: not on this node", field="device")
        if grant.mig_profile is not None and dev.vendor is Vendor.ASCEND:
            # a vNPU: the Ascend container runtime mounts /dev/vdavinci<ID>, which the
            # workload then sees as its device 0, 1, ...
            vnpus.append(_mig_uuid(grant, dev).removeprefix("vnpu"))
            continue
        ids = visible.setdefault(dev.vendor, [])
        if grant.mig_profile is not None:
            ids.append(_mig_uuid(grant, dev))
        elif dev.vendor is Vendor.NVIDIA and dev.uuid:
            ids.append(dev.uuid)
        else:
            ids.append(str(dev.local_index))
        if grant.fractional:
            if dev.vendor is Vendor.NVIDIA:
                shares.append((len(ids) - 1, grant))
            env[f"GPUPOOL_DEVICE_MEM_LIMIT_MIB_{len(ids) - 1}"] = str(grant.mem_mib)
    if vnpus:  # inside the container they are devices 0..n-1 (besides any whole cards)
        ids = visible.setdefault(Vendor.ASCEND, [])
        ids += [str(len(ids) + i) for i in range(len(vnpus))]
    for vendor, ids in visible.items():
        env[VISIBLE[vendor]] = ",".join(ids)
    # always set, so a job's own value never mounts a device it was not granted
    env[ASCEND_VNPUS] = ",".join(vnpus) if vnpus else env.get(VISIBLE[Vendor.ASCEND], "")
    if Vendor.NVIDIA in visible:
        env["NVIDIA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"]  # container runtimes
    if shares:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(min(g.compute_pct for _, g in shares))
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(
            f"{pos}={g.mem_mib}M" for pos, g in shares
        )
        if hami_core:
            for pos, g in shares:
                env[f"CUDA_DEVICE_MEMORY_LIMIT_{pos}"] = f"{g.mem_mib}m"
            if len(shares) == 1:
                env["CUDA_DEVICE_MEMORY_LIMIT"] = f"{shares[0][1].mem_mib}m"
            env["CUDA_DEVICE_SM_LIMIT"] = str(min(g.compute_pct for _, g in shares))
            env["LD_PRELOAD"] = hami_core
    # every vendor's variable is set, so a job's own value for a vendor it was not granted
    # (a node with cards of two vendors) never shows it a card: none of that vendor's
    for vendor, name in VISIBLE.items():
        if vendor not in visible:
            env[name] = ""
    if Vendor.NVIDIA not in visible:
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env
