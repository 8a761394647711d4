"""The pure decision engine. Imports nothing from server, agent, db or web (DESIGN.md, 1)."""

from gpupool.scheduler.ask import Ask, compile_ask
from gpupool.scheduler.filters import Feasibility, feasibility
from gpupool.scheduler.fragmentation import FragmentationModel, Shape, ShapeMix
from gpupool.scheduler.placer import POLICY_NAMES, Placer, make_policy, schedule
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.types import (
    DeviceGrant,
    NodeGrant,
    Placement,
    PlacementResult,
    Unplaceable,
)

__all__ = [
    "POLICY_NAMES",
    "Ask",
    "ClusterState",
    "DeviceGrant",
    "Feasibility",
    "FragmentationModel",
    "NodeGrant",
    "Placement",
    "PlacementResult",
    "Placer",
    "Shape",
    "ShapeMix",
    "Unplaceable",
    "compile_ask",
    "feasibility",
    "make_policy",
    "schedule",
]
