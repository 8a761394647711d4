"""Dynamic MIG through NVML: create a GPU instance at a placement (with one compute instance
spanning it) and destroy one, as ``nvidia-smi mig -cgi PROFILE:START -C`` and ``-dci/-dgi``
do. NVML needs root for these calls; errors come back as ``MigError`` naming the card.

Tested against a stand-in NVML (tests/support/fake_nvml.py); the calls are listed in
docs/gpu-check.md for the next check on a real MIG card (it changes the card's layout, so it
runs only where the operator allows it).
"""

from typing import Any

from gpupool.devices.base import MigInstance
from gpupool.sharing.mig import MigTable

MIB = 1024 * 1024


class MigError(Exception):
    """NVML refused to create or destroy an instance."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def create(nv: Any, h: Any, index: int, table: MigTable, name: str, start: int) -> MigInstance:
    """Create ``name`` at memory slice ``start`` on card ``h``; returns the new instance with
    the MIG device UUID CUDA wants."""
    p = table.profile(name)
    try:
        placement = nv.c_nvmlGpuInstancePlacement_t()
        placement.start, placement.size = start, p.size
        gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, p.profile_id, placement)
        gi_id = nv.nvmlGpuInstanceGetInfo(gi).id
        ci_index = getattr(nv, f"NVML_COMPUTE_INSTANCE_PROFILE_{p.compute_slices}_SLICE")
        ci_info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, ci_index, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        )
        nv.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)
        for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
            except nv.NVMLError:
                continue
            if nv.nvmlDeviceGetGpuInstanceId(mig) == gi_id:
                memory = nv.nvmlDeviceGetMemoryInfo(mig).total // MIB
                return MigInstance(p.name, start, _text(nv.nvmlDeviceGetUUID(mig)), memory)
    except nv.NVMLError as exc:
        raise MigError(
            f"nvidia: card {index}: cannot create {name} at slice {start}: {exc}"
        ) from None
    raise MigError(f"nvidia: card {index}: created {name} at slice {start} but cannot find it")


def destroy(nv: Any, h: Any, index: int, uuid: str) -> None:
    """Destroy the instance whose MIG device has ``uuid``: its compute instance, then it."""
    try:
        for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
            except nv.NVMLError:
                continue
            if _text(nv.nvmlDeviceGetUUID(mig)) != uuid:
                continue
            gi = nv.nvmlDeviceGetGpuInstanceById(h, nv.nvmlDeviceGetGpuInstanceId(mig))
            ci = nv.nvmlGpuInstanceGetComputeInstanceById(
                gi, nv.nvmlDeviceGetComputeInstanceId(mig)
            )
            nv.nvmlComputeInstanceDestroy(ci)
            nv.nvmlGpuInstanceDestroy(gi)
            return
    except nv.NVMLError as exc:
        raise MigError(f"nvidia: card {index}: cannot destroy MIG instance {uuid}: {exc}") from None
    raise MigError(f"nvidia: card {index}: no MIG instance {uuid}")
