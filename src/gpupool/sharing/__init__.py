"""Virtualisation layer: how one device is cut (whole, MIG, fractional share, hybrid pools)."""

from gpupool.model import SharingMode
from gpupool.sharing.fractional import SharePolicy
from gpupool.sharing.mig import (
    TABLES,
    MigProfile,
    MigTable,
    Profile,
    choose_start,
    free_starts,
    models_with_profile,
    place,
    plan_repartition,
    table_for,
)
from gpupool.sharing.modes import PoolSharing

__all__ = [
    "TABLES",
    "MigProfile",
    "MigTable",
    "PoolSharing",
    "Profile",
    "SharePolicy",
    "SharingMode",
    "choose_start",
    "free_starts",
    "models_with_profile",
    "place",
    "plan_repartition",
    "table_for",
]
