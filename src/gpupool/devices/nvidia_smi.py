"""NVIDIA without NVML's Python binding: parse ``nvidia-smi -q -x`` (XML), ``nvidia-smi -L``
(MIG UUIDs and profile names) and ``nvidia-smi mig -lgi`` (placements); cut MIG cards with
``nvidia-smi mig``. Also the parser the NVML tests build their stand-in from."""

import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace

from gpupool.devices.base import (
    DeviceInfo,
    DeviceTelemetry,
    DiscoveryError,
    GpuProcess,
    MigInstance,
    ToolBackend,
    ToolReport,
    number,
    optional_number,
)
from gpupool.devices.naming import model_name
from gpupool.devices.nvidia_mig import MigError
from gpupool.devices.nvidia_smi_mig import (
    MigDeviceIds,
    create_argv,
    destroy_argvs,
    parse_created,
    parse_gpu_instances,
    parse_mig_ids,
)
from gpupool.devices.tools import run_tool
from gpupool.model import SharingMode, SpecError, Vendor
from gpupool.sharing.mig import table_for

log = logging.getLogger("gpupool.devices")

SM_PER_SLICE = {"A100": 14, "A30": 14, "H100": 16, "H200": 16}
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)")


def _profile(model: str, memory_mib: int, sms: float | None) -> str:
    """Name a MIG instance from its memory and SM count (the XML gives no profile name)."""
    table = table_for(model)
    if table is None:
        return f"{memory_mib}mib"
    close = [p for p in table.profiles if abs(p.memory_mib - memory_mib) <= 0.05 * p.memory_mib]
    per_slice = next((v for k, v in SM_PER_SLICE.items() if model.startswith(k)), None)
    if sms is not None and per_slice:
        slices = round(sms / per_slice)
        close = [p for p in close if p.compute_slices == slices] or close
    plain = [p for p in close if "+" not in p.name] or close
    return plain[0].name if plain else f"{memory_mib}mib"


def parse_query_xml(text: str) -> ToolReport:
    """Devices, telemetry and processes from ``nvidia-smi -q -x``."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DiscoveryError(f"nvidia-smi -q -x: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise DiscoveryError(f"nvidia-smi -q -x: unexpected root element <{root.tag}>")
    report = ToolReport()
    for index, gpu in enumerate(root.findall("gpu")):
        where = f"nvidia-smi -q -x: gpu {index}"
        product = (gpu.findtext("product_name") or "").strip()
        if not product:
            raise DiscoveryError(f"{where}: no product_name")
        memory = int(number(gpu.findtext("fb_memory_usage/total"), f"{where} memory total"))
        model = model_name(Vendor.NVIDIA, product, memory)
        mig_on = (gpu.findtext("mig_mode/current_mig") or "").strip() == "Enabled"
        instances = []
        by_gi: dict[str, int] = {}
        for m in gpu.findall("mig_devices/mig_device"):
            mem = int(number(m.findtext("fb_memory_usage/total"), f"{where} MIG memory"))
            sms = optional_number(m.findtext("device_attributes/shared/multiprocessor_count"))
            instances.append(MigInstance(_profile(model, mem, sms), None, "", mem))
            by_gi[(m.findtext("gpu_instance_id") or "").strip()] = len(instances) - 1
        uuid = (gpu.findtext("uuid") or "").strip()
        uncorrected = optional_number(gpu.findtext("ecc_errors/volatile/dram_uncorrectable"))
        report.devices.append(
            DeviceInfo(
                vendor=Vendor.NVIDIA,
                local_index=index,
                model=model,
                memory_mib=memory,
                uuid=uuid,
                product=product,
                mode=SharingMode.MIG if mig_on else SharingMode.WHOLE,
                mig=tuple(instances),
                bus_id=gpu.get("id", ""),
            )
        )
        report.telemetry.append(
            DeviceTelemetry(
                local_index=index,
                util_pct=optional_number(gpu.findtext("utilization/gpu_util")),
                mem_used_mib=_int(optional_number(gpu.findtext("fb_memory_usage/used"))),
                temp_c=optional_number(gpu.findtext("temperature/gpu_temp")),
                power_w=optional_number(gpu.findtext("gpu_power_readings/power_draw"))
                or optional_number(gpu.findtext("power_readings/power_draw")),
                healthy=not uncorrected,
                ecc_errors=_int(uncorrected),
            )
        )
        for p in gpu.findall("processes/process_info"):
            pid = int(number(p.findtext("pid"), f"{where} process pid"))
            used = int(optional_number(p.findtext("used_memory")) or 0)
            report.processes.append(GpuProcess(uuid, pid, used))
    return report


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def parse_list(text: str) -> dict[int, list[tuple[str, int, str]]]:
    """``nvidia-smi -L``: per GPU index, its MIG devices as (profile, device index, UUID)."""
    out: dict[int, list[tuple[str, int, str]]] = {}
    current: int | None = None
    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            current = int(m.group(1))
            out[current] = []
        elif (m := _MIG_LINE.match(line)) and current is not None:
            out[current].append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def with_mig_uuids(devices: list[DeviceInfo], listing: dict[int, list]) -> list[DeviceInfo]:
    """Give each MIG instance its UUID (and the profile name nvidia-smi prints)."""
    out = []
    for d in devices:
        migs = listing.get(d.local_index, [])
        if d.mig and len(migs) == len(d.mig):
            named = tuple(
                replace(inst, profile=profile, uuid=uuid)
                for inst, (profile, _j, uuid) in zip(
                    d.mig, sorted(migs, key=lambda m: m[1]), strict=True
                )
            )
            d = replace(d, mig=named)
        out.append(d)
    return out


class NvidiaSmiBackend(ToolBackend):
    """Used when NVML's binding is missing but the driver's ``nvidia-smi`` is there; it cuts
    MIG cards on order too (``gpupool.devices.nvidia_smi_mig``). ``run`` is ``run_tool``
    (tests give a stand-in)."""

    name = "nvidia-smi"

    def __init__(self, run: Callable[[list[str]], str] = run_tool):
        self.run = run

    def report(self) -> ToolReport:
        return parse_query_xml(self.run(["nvidia-smi", "-q", "-x"]))

    def discover(self) -> list[DeviceInfo]:
        return [d for d, _ in self._cards()]

    def _cards(self) -> list[tuple[DeviceInfo, list[MigDeviceIds]]]:
        """Each card, its MIG instances named, with UUIDs and placements, and their ids."""
        xml_text = self.run(["nvidia-smi", "-q", "-x"])
        devices = parse_query_xml(xml_text).devices
        if not any(d.mig for d in devices):
            return [(d, []) for d in devices]
        devices = with_mig_uuids(devices, parse_list(self.run(["nvidia-smi", "-L"])))
        ids = parse_mig_ids(xml_text)
        try:
            rows = parse_gpu_instances(self.run(["nvidia-smi", "mig", "-lgi"]))
        except (DiscoveryError, MigError) as exc:  # placements unknown: nothing is cut
            log.warning("nvidia-smi: MIG placements unknown: %s", exc)
            rows = []
        start = {(r.gpu, r.gi): r.start for r in rows}
        out = []
        for d in devices:
            mine = ids.get(d.local_index, [])
            if d.mig and len(mine) == len(d.mig):
                placed = tuple(
                    replace(inst, start=start.get((d.local_index, m.gi)))
                    for inst, m in zip(d.mig, mine, strict=True)
                )
                d = replace(d, mig=placed)
            out.append((d, mine))
        return out

    def _card(self, index: int) -> tuple[DeviceInfo, list[MigDeviceIds]]:
        for d, ids in self._cards():
            if d.local_index == index:
                return d, ids
        raise MigError(f"nvidia: no card {index}")

    # -- dynamic MIG (MigControl) ---------------------------------------------------------
    def create_mig(self, local_index: int, profile: str, start: int) -> MigInstance:
        card, _ = self._card(local_index)
        table = table_for(card.model)
        if table is None or card.mode is not SharingMode.MIG:
            raise MigError(f"nvidia: card {local_index} ({card.model}) is not in MIG mode")
        try:
            p = table.profile(profile)
        except SpecError as exc:
            raise MigError(f"nvidia: card {local_index}: {exc}") from None
        try:
            said = self.run(create_argv(local_index, p.profile_id, start))
        except DiscoveryError as exc:
            raise MigError(
                f"nvidia: card {local_index}: cannot create {profile} at slice {start}: {exc}"
            ) from None
        gi = parse_created(said, local_index)
        card, ids = self._card(local_index)
        for inst, m in zip(card.mig, ids, strict=False):
            if m.gi == gi:
                return inst
        raise MigError(
            f"nvidia: card {local_index}: created {profile} at slice {start} but cannot find it"
        )

    def set_mig_mode(self, local_index: int, on: bool) -> None:
        """``nvidia-smi -i N -mig 1|0``; a change the driver holds until a GPU reset leaves
        the card as it is, and this says so."""
        state = "on" if on else "off"
        try:
            self.run(["nvidia-smi", "-i", str(local_index), "-mig", "1" if on else "0"])
        except DiscoveryError as exc:
            raise MigError(f"nvidia: card {local_index}: cannot turn MIG {state}: {exc}") from None
        card, _ = self._card(local_index)
        if (card.mode is SharingMode.MIG) != on:
            raise MigError(
                f"nvidia: card {local_index}: MIG {state} is pending a GPU reset "
                f"(nvidia-smi -i {local_index} -r with nothing on the card)"
            )

    def destroy_mig(self, local_index: int, uuid: str) -> None:
        card, ids = self._card(local_index)
        for inst, m in zip(card.mig, ids, strict=False):
            if inst.uuid == uuid:
                try:
                    for argv in destroy_argvs(local_index, m.gi, m.ci):
                        self.run(argv)
                except DiscoveryError as exc:
                    raise MigError(
                        f"nvidia: card {local_index}: cannot destroy MIG instance {uuid}: {exc}"
                    ) from None
                return
        raise MigError(f"nvidia: card {local_index}: no MIG instance {uuid}")
