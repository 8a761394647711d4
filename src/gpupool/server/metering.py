"""Metering maths (pure): what an allocation held, per device model, over some seconds.

``device_seconds`` counts whole (exclusive) cards; ``compute_pct_seconds`` counts percent of a
card for every grant (a whole card is 100, a 3g MIG slice of 7 is its compute percent, a
share its compute share); memory in MiB-seconds — a whole card at its full memory, whatever
the card's mode (a share-mode card's headroom is the pool's, not the tenant's gain); CPU once
per allocation, on its first record.
"""

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, NamedTuple

from gpupool.scheduler.cycle import MIG_PERCENT


class Card(NamedTuple):
    """What metering needs of a device: its model and its whole memory."""

    model: str
    memory_mib: int


UNKNOWN = Card("unknown", 0)


def meter(
    placement: dict[str, Any], cards: Mapping[tuple[str, int], Card], seconds: int
) -> list[dict[str, Any]]:
    per_model: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    cpu = 0
    for n in placement["nodes"]:
        cpu += n["cpu_millis"]
        for d in n["devices"]:
            card = cards.get((n["node"], d["device"]), UNKNOWN)
            acc = per_model[card.model]
            acc[0] += 1
            acc[1] += 1 if d["exclusive"] else 0
            mig = d.get("mig_profile")
            acc[2] += MIG_PERCENT.get(mig, 0) if mig else d["compute_pct"]
            whole = d["exclusive"] and not mig
            acc[3] += max(d["mem_mib"], card.memory_mib) if whole else d["mem_mib"]
    if not per_model:
        per_model["cpu"] = [0, 0, 0, 0]
    records = []
    for i, (model, (devices, exclusive, pct, mem)) in enumerate(sorted(per_model.items())):
        records.append(
            {
                "model": model,
                "devices": devices,
                "device_seconds": exclusive * seconds,
                "compute_pct_seconds": pct * seconds,
                "mem_mib_seconds": mem * seconds,
                "cpu_milli_seconds": cpu * seconds if i == 0 else 0,
            }
        )
    return records
