"""A parked replica's placement (issue 49): asleep, its engine's weights in host memory, it
holds its node's CPU and memory but no device — its card is lent to training — and wakes
onto the same card (its CUDA context lives there). Pure."""

from dataclasses import replace
from typing import Any

from gpupool.scheduler.placement_json import placement_from_json, placement_to_json
from gpupool.scheduler.types import Placement


def parked(p: Placement) -> Placement:
    """``p`` without its devices."""
    return replace(p, nodes=tuple(replace(n, devices=()) for n in p.nodes))


def card_of(p: Placement) -> list[dict[str, Any]]:
    """The devices of ``p``, as JSON (kept while it is parked)."""
    return [d for n in placement_to_json(p)["nodes"] for d in n["devices"]]


def woken(p: Placement, card: list[dict[str, Any]]) -> Placement:
    """``p`` (parked, one node) with ``card`` back."""
    data = placement_to_json(p)
    data["nodes"][0]["devices"] = list(card)
    return placement_from_json(p.job_id, data)
