"""A simulated node from a spec (``4xA100-80G``, ``2xA100-80G,2xT4``) or a YAML file: models,
memory, topology, MIG instances, and synthetic telemetry that follows the load the agent
reports. What ``gpupool up`` runs on, and what a machine without accelerators can test with.

YAML format (``examples/devices-simulated.yaml``)::

    seed: 7
    devices:
      - {model: A100-80G, count: 4, island: 0}
      - model: A100-80G
        mig: [{profile: 3g.40gb, start: 4}, {profile: 2g.20gb, start: 0}]
      - {model: T4, count: 2, memory_mib: 15360}
"""

import math
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpupool.devices.base import (
    DeviceInfo,
    DeviceTelemetry,
    GpuProcess,
    MigInstance,
)
from gpupool.model import SharingMode, SpecError, Vendor, canonical_model
from gpupool.model.devices import catalog_entry
from gpupool.model.errors import from_validation
from gpupool.sharing.mig import table_for
from gpupool.sharing.vnpu import MAX_VNPUS_PER_CHIP, VNPU_TABLES, vnpu_id


class _Mig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: str
    start: int = Field(ge=0, le=7)


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1)
    count: int = Field(1, ge=1, le=64)
    vendor: Vendor | None = None
    memory_mib: int | None = Field(None, gt=0)
    island: int | None = Field(None, ge=0)
    mode: SharingMode = SharingMode.WHOLE
    mig: list[_Mig] = Field(default_factory=list)
    healthy: bool = True


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = 0
    devices: list[_Group] = Field(min_length=1, max_length=64)


def parse_spec(spec: str) -> _File:
    """``4xA100-80G`` or ``2xA100-80G,2xT4`` (count defaults to 1); ``2xA100-80G:mig`` for
    cards in MIG mode with no instance yet (the agent cuts them as jobs are granted)."""
    groups = []
    for part in spec.split(","):
        part, colon, mode = part.strip().partition(":")
        count, sep, model = part.partition("x")
        if not sep or not count.isdigit():
            count, model = "1", part
        if not model:
            raise SpecError(f"simulated devices: {part!r} is not COUNTxMODEL", token=part)
        group: dict[str, Any] = {"model": model, "count": int(count), "island": 0}
        if colon:
            group["mode"] = mode
        groups.append(group)
    return _validated({"devices": groups}, f"simulated:{spec}")


def load_file(path: Path) -> _File:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SpecError(f"simulated devices: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"simulated devices: {path} is not YAML: {exc}") from None
    return _validated(data, str(path))


def _validated(data: Any, where: str) -> _File:
    try:
        return _File.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc, f"simulated devices {where}") from None


def _mig_layout(model: str, wanted: list[_Mig]) -> list[tuple[str, int, int]]:
    """(profile, start, MiB) per instance, checked against the model's MIG table: legal starts,
    no two instances on the same memory slices."""
    if not wanted:
        return []
    table = table_for(model)
    if table is None:
        raise SpecError(f"simulated devices: {model} has no MIG")
    occupied, out = 0, []
    for m in wanted:
        profile = table.profile(m.profile)
        if not profile.fits(occupied, m.start):
            raise SpecError(
                f"simulated devices: {m.profile} cannot start at slice {m.start} on {model} "
                f"(legal starts {list(profile.starts)}, not overlapping the others)"
            )
        occupied = profile.take(occupied, m.start)
        out.append((profile.name, m.start, profile.memory_mib))
    return out


class SimulatedBackend:
    name = "simulated"

    def __init__(self, config: _File, node: str = "sim"):
        self.node = node
        self._rng = random.Random(config.seed)
        self._devices = self._build(config)
        self.load: dict[int, float] = {}  # local index -> granted fraction, set by the agent
        self.unhealthy: set[int] = set()  # tests and demos can fail a card

    def _build(self, config: _File) -> list[DeviceInfo]:
        out: list[DeviceInfo] = []
        for group in config.devices:
            model = canonical_model(group.model)
            entry = catalog_entry(model)
            vendor = group.vendor or (entry.vendor if entry else None)
            memory = group.memory_mib or (entry.memory_mib if entry else None)
            if vendor is None or memory is None:
                raise SpecError(
                    f"simulated devices: {model} is not in the catalog; give vendor and memory_mib"
                )
            layout = _mig_layout(model, group.mig)
            for _ in range(group.count):
                i = len(out)
                vnpu = model in VNPU_TABLES  # Ascend: the id npu-smi would give
                mig = tuple(
                    MigInstance(
                        name,
                        start,
                        f"vnpu{vnpu_id(i, start)}"
                        if vnpu
                        else f"MIG-sim-{self.node}-{i}-{name}-{start}",
                        mib,
                    )
                    for name, start, mib in layout
                )
                mode = SharingMode.MIG if mig else group.mode
                out.append(
                    DeviceInfo(
                        vendor=Vendor(vendor),
                        local_index=i,
                        model=model,
                        memory_mib=memory,
                        uuid=f"GPU-sim-{self.node}-{i}",
                        product=f"Simulated {model}",
                        healthy=group.healthy,
                        mode=mode,
                        mig=mig,
                        island=group.island,
                    )
                )
        return out

    def discover(self) -> list[DeviceInfo]:
        return list(self._devices)

    def telemetry(self) -> list[DeviceTelemetry]:
        """Busy cards run at 60-95% and fill most of their granted memory; idle cards idle."""
        wave = 0.5 + 0.5 * math.sin(time.time() / 60)
        out = []
        for d in self._devices:
            load = min(1.0, self.load.get(d.local_index, 0.0))
            util = round(load * (60 + 35 * wave) + self._rng.uniform(0, 2), 1) if load else 0.0
            healthy = d.healthy and d.local_index not in self.unhealthy
            out.append(
                DeviceTelemetry(
                    local_index=d.local_index,
                    util_pct=min(100.0, util),
                    mem_used_mib=int(d.memory_mib * load * 0.8) if load else 3,
                    temp_c=round(32 + util * 0.4, 1),
                    power_w=round(60 + util * 3.4, 1),
                    healthy=healthy,
                    ecc_errors=0 if healthy else 1,
                )
            )
        return out

    def processes(self) -> list[GpuProcess]:
        return []

    # -- dynamic MIG (MigControl) ---------------------------------------------------------
    def create_mig(self, local_index: int, profile: str, start: int) -> MigInstance:
        """As NVML would: a legal start on a MIG-mode card, no overlap with live instances."""
        d = self._devices[local_index]
        table = table_for(d.model)
        if d.mode != SharingMode.MIG or table is None:
            raise SpecError(f"mig: device {local_index} ({d.model}) is not in MIG mode")
        # the same legality check as a YAML layout: legal start, no overlap
        # a simulated instance always knows its start (it was made from a layout)
        wanted = [_Mig.model_construct(profile=m.profile, start=m.start or 0) for m in d.mig]
        wanted.append(_Mig.model_construct(profile=profile, start=start))
        name, _, mib = _mig_layout(d.model, wanted)[-1]
        made = MigInstance(name, start, f"MIG-sim-{self.node}-{local_index}-{name}-{start}", mib)
        self._devices[local_index] = replace(d, mig=(*d.mig, made))
        return made

    def destroy_mig(self, local_index: int, uuid: str) -> None:
        d = self._devices[local_index]
        if not any(m.uuid == uuid for m in d.mig):
            raise SpecError(f"mig: no instance {uuid} on device {local_index}")
        self._devices[local_index] = replace(d, mig=tuple(m for m in d.mig if m.uuid != uuid))

    # -- Ascend vNPUs (as npu-smi create-vnpu / destroy-vnpu) -----------------------------
    def create_vnpu(self, local_index: int, template: str) -> MigInstance:
        """A vNPU with the chip's first free id (``100 + 16 * index + slot``), if the chip
        still has the template's AI Cores and AI CPUs."""
        d = self._devices[local_index]
        table = VNPU_TABLES.get(d.model)
        if d.mode != SharingMode.MIG or table is None:
            raise SpecError(f"vnpu: device {local_index} ({d.model}) is not cut into vNPUs")
        if not table.holds([m.profile for m in d.mig] + [template]):
            raise SpecError(f"vnpu: device {local_index}: no room for {template}")
        slot = min({*range(MAX_VNPUS_PER_CHIP)} - {m.start for m in d.mig})
        mib = table.profile(template).memory_mib
        made = MigInstance(template, slot, f"vnpu{vnpu_id(local_index, slot)}", mib)
        self._devices[local_index] = replace(d, mig=(*d.mig, made))
        return made

    def destroy_vnpu(self, local_index: int, uuid: str) -> None:
        self.destroy_mig(local_index, uuid)

    def set_mig_mode(self, local_index: int, on: bool) -> None:
        """MIG mode on or off, as NVML allows it: only with no instance left; it takes effect
        at once (as on cards that need no GPU reset for it)."""
        d = self._devices[local_index]
        if table_for(d.model) is None:
            raise SpecError(f"mig: device {local_index} ({d.model}) cannot do MIG")
        if d.mig:
            names = ", ".join(f"{m.profile}@{m.start}" for m in d.mig)
            raise SpecError(f"mig: device {local_index} still has instances ({names})")
        self._devices[local_index] = replace(d, mode=SharingMode.MIG if on else SharingMode.WHOLE)


def simulated_backend(spec: str, node: str) -> SimulatedBackend:
    """``simulated:4xA100-80G`` or a YAML file path."""
    if spec.startswith("simulated:"):
        return SimulatedBackend(parse_spec(spec.removeprefix("simulated:")), node)
    return SimulatedBackend(load_file(Path(spec)), node)


def check(spec: str) -> None:
    """Raise ``SpecError`` if a simulated spec cannot be built."""
    simulated_backend(spec, "check")
