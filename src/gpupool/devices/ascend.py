"""Huawei Ascend through ``npu-smi info``: one device per chip (the unit
``ASCEND_RT_VISIBLE_DEVICES`` counts), with health, power, temperature, AI-core use and HBM
(or DDR on cards without HBM), and the process table for the memory watchdog."""

import logging
from dataclasses import replace

from gpupool.devices.ascend_vnpu import VnpuControl
from gpupool.devices.base import (
    DeviceInfo,
    DeviceTelemetry,
    DiscoveryError,
    GpuProcess,
    MigInstance,
    ToolBackend,
    ToolReport,
    optional_number,
)
from gpupool.devices.naming import model_name
from gpupool.devices.tools import run_tool
from gpupool.model import SharingMode, Vendor

log = logging.getLogger("gpupool.devices")
HEALTHY = ("OK", "Warning")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _used_total(text: str, what: str, line_no: int) -> list[tuple[int, int]]:
    """Pairs ``used / total`` in a cell such as ``0    / 0          20701/ 65536``."""
    tokens = text.replace("/", " / ").split()
    pairs = []
    for i, tok in enumerate(tokens):
        if tok == "/" and 0 < i < len(tokens) - 1:
            try:
                pairs.append((int(tokens[i - 1]), int(tokens[i + 1])))
            except ValueError:
                raise DiscoveryError(
                    f"npu-smi info: line {line_no}: {what} {text!r} is not used/total"
                ) from None
    return pairs


def parse_npu_smi_info(text: str) -> ToolReport:
    lines = text.splitlines()
    report = ToolReport()
    has_hbm = any("HBM-Usage" in line for line in lines)
    header_seen = False
    chip_rows: list[tuple[int, list[str], list[str]]] = []
    first: list[str] | None = None
    process_section = False
    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if not s.startswith("|") or s.startswith("+"):
            continue
        cells = _cells(s)
        if cells[0].startswith("NPU") and "Name" in cells[0]:
            header_seen = True
            continue
        if cells[0].startswith("NPU") and len(cells) > 1 and cells[1].startswith("Process"):
            process_section = True
            continue
        if cells[0].startswith("Chip") or cells[0].startswith("npu-smi") or "No running" in s:
            continue
        if process_section:
            if len(cells) >= 4 and cells[1].isdigit():
                npu_chip = cells[0].split()
                report.processes.append(
                    GpuProcess(
                        f"npu{npu_chip[0]}-chip{npu_chip[-1]}",
                        int(cells[1]),
                        int(optional_number(cells[3]) or 0),
                    )
                )
            continue
        if not header_seen or len(cells) < 3:
            continue
        if first is None:
            first = cells
        else:
            chip_rows.append((no, first, cells))
            first = None
    if not header_seen:
        raise DiscoveryError("npu-smi info: no device table (header 'NPU Name' not found)")
    if first is not None:
        raise DiscoveryError("npu-smi info: the device table ends in the middle of an NPU")
    for logical, (no, top, bottom) in enumerate(chip_rows):
        head = top[0].split()
        chip = bottom[0].split()
        if len(head) < 2 or not head[0].isdigit() or not chip or not chip[0].isdigit():
            raise DiscoveryError(
                f"npu-smi info: line {no}: cannot read NPU/chip ids from {top[0]!r}"
            )
        npu, name, health = int(head[0]), head[1], top[1]
        pairs = _used_total(bottom[2], "memory", no)
        if not pairs:
            raise DiscoveryError(f"npu-smi info: line {no}: no memory usage in {bottom[2]!r}")
        used, total = pairs[-1] if has_hbm and len(pairs) > 1 else pairs[0]
        power_temp = top[2].split()
        bus = bottom[1] if bottom[1] not in ("NA", "") else ""
        model = model_name(Vendor.ASCEND, name, total)
        report.devices.append(
            DeviceInfo(
                vendor=Vendor.ASCEND,
                local_index=logical,
                model=model,
                memory_mib=total,
                uuid=f"npu{npu}-chip{chip[0]}",
                product=name,
                healthy=health in HEALTHY,
                island=0 if model.startswith("Ascend910") else None,
                bus_id=bus,
            )
        )
        report.telemetry.append(
            DeviceTelemetry(
                local_index=logical,
                util_pct=optional_number(bottom[2].split()[0]),
                mem_used_mib=used,
                power_w=optional_number(power_temp[0] if power_temp else None),
                temp_c=optional_number(power_temp[1] if len(power_temp) > 1 else None),
                healthy=health in HEALTHY,
            )
        )
    return report


class AscendBackend(ToolBackend):
    """``npu-smi info`` for devices and telemetry; at discovery also each chip's vNPUs (chips
    whose model has vNPU templates), which makes such a chip a partitioned (MIG-mode) one."""

    name = "ascend"

    def __init__(self) -> None:
        self.control = VnpuControl({})

    def report(self) -> ToolReport:
        return parse_npu_smi_info(run_tool(["npu-smi", "info"]))

    def discover(self) -> list[DeviceInfo]:
        devices = self.report().devices
        self.control = VnpuControl({d.local_index: d.uuid for d in devices})
        out = []
        for d in devices:
            try:
                vnpus = self.control.vnpus(d.local_index, d.model)
            except DiscoveryError as exc:  # a chip we cannot ask keeps no vNPUs, not the node
                log.warning("%s: vNPUs not read: %s", d.uuid, exc)
                vnpus = ()
            out.append(replace(d, mig=vnpus, mode=SharingMode.MIG) if vnpus else d)
        return out

    def create_vnpu(self, local_index: int, template: str) -> MigInstance:
        return self.control.create_vnpu(local_index, template)

    def destroy_vnpu(self, local_index: int, uuid: str) -> None:
        self.control.destroy_vnpu(local_index, uuid)
