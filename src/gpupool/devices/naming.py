"""Vendor product names to the catalog's model names (``NVIDIA A100-SXM4-80GB`` ->
``A100-80G``), so a discovered card matches the requests and prices that name it."""

import re

from gpupool.model import Vendor, canonical_model
from gpupool.model.devices import catalog_entry

_NVIDIA_FAMILY = re.compile(r"\b(A100|A30|H100|H200|H800|H20|L40S|L40|L4|A10|A40|T4|V100S?|P100)\b")
_RTX = re.compile(r"RTX\s*(\d{4})")


def _gib(memory_mib: int) -> int:
    """Marketing size from the reported total (an 80 GB card reports 79.6-81.5 GiB)."""
    return round(memory_mib / 1024)


def model_name(vendor: Vendor, product: str, memory_mib: int) -> str:
    """The catalog name when we know the card, else a cleaned-up product name."""
    text = product.replace("NVIDIA", "").replace("Tesla", "").strip()
    if vendor is Vendor.NVIDIA:
        if (m := _RTX.search(text)) is not None:
            return canonical_model(f"RTX{m.group(1)}")
        if (m := _NVIDIA_FAMILY.search(text)) is not None:
            family = m.group(1)
            for candidate in (f"{family}-{_gib(memory_mib)}G", family):
                if (entry := catalog_entry(candidate)) is not None:
                    return entry.name
            return canonical_model(f"{family}-{_gib(memory_mib)}G")
    if vendor is Vendor.ASCEND:
        upper = text.upper().replace("ASCEND", "").strip()
        if (m := re.match(r"910B(\d)", upper)) is not None:  # 910B2C, 910B3, 910B4
            chip = f"Ascend910B-B{m.group(1)}"  # their vNPU templates differ
            return chip if catalog_entry(chip) is not None else "Ascend910B"
        if upper.startswith("910"):
            return "Ascend910B" if upper.startswith("910B") else "Ascend910"
        if upper.startswith("310P"):
            return "Ascend310P"
        return canonical_model(f"Ascend{upper}")
    if vendor is Vendor.CAMBRICON and (m := re.search(r"MLU\s*(\d+)", text.upper())):
        return f"MLU{m.group(1)}"
    if vendor is Vendor.HYGON and (m := re.search(r"\b([KZ]\d{3})", text.upper())):
        return m.group(1)
    return canonical_model(text or "unknown")
