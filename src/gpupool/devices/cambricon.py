"""Cambricon MLU through ``cnmon info``: ``Card N`` blocks of ``key : value`` lines, with
``Physical Memory Usage`` (Total / Used / Free MiB), ``MLU Average`` use, the chip
temperature and power usage."""

import re

from gpupool.devices.base import (
    DeviceInfo,
    DeviceTelemetry,
    DiscoveryError,
    GpuProcess,
    ToolBackend,
    ToolReport,
    optional_number,
)
from gpupool.devices.naming import model_name
from gpupool.devices.tools import run_tool
from gpupool.model import Vendor

_CARD = re.compile(r"^\s*Card\s+(\d+)\s*$")


def _blocks(text: str) -> list[tuple[int, int, list[tuple[int, str, str, str]]]]:
    """Per card: (index, line number, [(line no, section, key, value)])."""
    blocks: list[tuple[int, int, list[tuple[int, str, str, str]]]] = []
    section = ""
    for no, line in enumerate(text.splitlines(), start=1):
        if m := _CARD.match(line):
            blocks.append((int(m.group(1)), no, []))
            section = ""
            continue
        if not blocks or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        indented = line[: len(line) - len(line.lstrip())]
        if not value:
            section = key
        elif len(indented) < 4:
            section = ""
        blocks[-1][2].append((no, section, key, value))
    return blocks


def parse_cnmon_info(text: str) -> ToolReport:
    blocks = _blocks(text)
    if not blocks:
        raise DiscoveryError("cnmon info: no 'Card N' block")
    report = ToolReport()
    for index, card_line, entries in blocks:

        def get(key: str, section: str = "", entries=entries) -> str | None:
            for _no, sec, k, v in entries:
                if k.lower() == key.lower() and (
                    not section or sec.lower().startswith(section.lower())
                ):
                    return v
            return None

        product = get("Product Name")
        total = optional_number(get("Total", "Physical Memory"))
        if product is None or total is None:
            raise DiscoveryError(
                f"cnmon info: card {index} (line {card_line}): missing "
                + ("Product Name" if product is None else "Physical Memory Usage Total")
            )
        report.devices.append(
            DeviceInfo(
                vendor=Vendor.CAMBRICON,
                local_index=index,
                model=model_name(Vendor.CAMBRICON, product, int(total)),
                memory_mib=int(total),
                uuid=get("UUID") or f"mlu{index}",
                product=product,
                bus_id=get("Bus ID") or get("PCIe Bus Id") or "",
            )
        )
        used = optional_number(get("Used", "Physical Memory"))
        report.telemetry.append(
            DeviceTelemetry(
                local_index=index,
                util_pct=optional_number(get("MLU Average")),
                mem_used_mib=None if used is None else int(used),
                temp_c=optional_number(get("Chip", "Temperature")),
                power_w=optional_number(get("Usage", "Power")),
            )
        )
    return report


class CambriconBackend(ToolBackend):
    name = "cambricon"

    def report(self) -> ToolReport:
        return parse_cnmon_info(run_tool(["cnmon", "info"]))

    def processes(self) -> list[GpuProcess]:
        return []
