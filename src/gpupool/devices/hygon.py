"""Hygon DCU through ``hy-smi`` or ``rocm-smi`` with ``--json``: one entry per ``cardN`` with
product, unique id, power, temperatures, use and VRAM (MiB or bytes, by DTK version)."""

import json
from typing import Any

from gpupool.devices.base import (
    BackendUnavailable,
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

QUERY = ["--showproductname", "--showuniqueid", "--showmeminfo", "vram", "--showuse",
         "--showtemp", "--showpower", "--json"]  # fmt: skip


def _field(card: dict[str, Any], *names: str) -> str | None:
    for name in names:
        for key, value in card.items():
            if key.lower().startswith(name.lower()):
                return str(value)
    return None


def _mib(card: dict[str, Any], what: str) -> int | None:
    for key, value in card.items():
        if key.lower().startswith(f"vram total {what}".lower()):
            amount = optional_number(str(value))
            if amount is None:
                return None
            return int(amount if "(MiB)" in key else amount / (1024 * 1024))
    return None


def parse_smi_json(text: str, tool: str = "rocm-smi") -> ToolReport:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DiscoveryError(f"{tool} --json: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise DiscoveryError(f"{tool} --json: expected an object of cards")
    cards = sorted(
        ((int(k[4:]), v) for k, v in data.items() if k.startswith("card") and k[4:].isdigit()),
        key=lambda kv: kv[0],
    )
    if not cards:
        raise DiscoveryError(f"{tool} --json: no 'cardN' entries")
    report = ToolReport()
    for index, card in cards:
        if not isinstance(card, dict):
            raise DiscoveryError(f"{tool} --json: card{index} is not an object")
        vendor_name = _field(card, "Card Vendor") or ""
        if (
            vendor_name
            and "haiguang" not in vendor_name.lower()
            and "hygon" not in vendor_name.lower()
        ):
            raise BackendUnavailable(f"{tool}: card{index} is from {vendor_name}, not Hygon")
        total = _mib(card, "Memory")
        if total is None:
            raise DiscoveryError(f"{tool} --json: card{index} has no 'vram Total Memory'")
        product = _field(card, "Card Series", "Card Model", "Card SKU") or "DCU"
        report.devices.append(
            DeviceInfo(
                vendor=Vendor.HYGON,
                local_index=index,
                model=model_name(Vendor.HYGON, product, total),
                memory_mib=total,
                uuid=_field(card, "Unique ID") or f"dcu{index}",
                product=product,
            )
        )
        report.telemetry.append(
            DeviceTelemetry(
                local_index=index,
                util_pct=optional_number(_field(card, "DCU use", "GPU use")),
                mem_used_mib=_mib(card, "Used Memory"),
                temp_c=optional_number(
                    _field(card, "Temperature (Sensor junction)", "Temperature")
                ),
                power_w=optional_number(
                    _field(
                        card,
                        "Average Graphics Package Power",
                        "Current Socket Graphics Package Power",
                    )
                ),
            )
        )
    return report


class HygonBackend(ToolBackend):
    name = "hygon"

    def report(self) -> ToolReport:
        try:
            return parse_smi_json(run_tool(["hy-smi", *QUERY]), "hy-smi")
        except BackendUnavailable:
            return parse_smi_json(run_tool(["rocm-smi", *QUERY]), "rocm-smi")

    def processes(self) -> list[GpuProcess]:
        return []  # the SMI JSON has no per-process memory; the watchdog skips these cards
