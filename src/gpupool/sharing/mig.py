"""MIG profile tables, legal placements, and re-partition planning.

A GPU instance occupies ``size`` consecutive memory slices starting at one of the profile's
legal ``starts`` (NVML's ``nvmlGpuInstancePlacement_t``: start + size in memory slices, as
``nvidia-smi mig -lgipp`` prints them). Seven-compute-slice GPUs (A100, H100, H200) have 8
memory-slice positions; A30 has 4. Two instances never share a position.

Sources: NVIDIA MIG user guide, "Supported MIG Profiles" (names, instance counts, placements);
memory sizes are the GiB that ``nvidia-smi mig -lgip`` reports, converted to MiB (H200: the
MiB of NVIDIA's go-nvml mock of the H200). Occupancy is a bit mask over positions, plus
``MEDIA_BIT`` for the card's media engines: a ``+me`` profile takes them all, so a GPU holds at
most one ``+me`` instance (NVIDIA's MIG user guide).
"""

from dataclasses import dataclass
from functools import cache

from gpupool.model import SpecError, canonical_model
from gpupool.sharing.vnpu import VNPU_TABLES, VnpuTable, VnpuTemplate

MEDIA_BIT = 1 << 8  # above every memory-slice position (at most 8)
OCCUPANCY_STATES = 1 << 9  # masks of positions and the media bit


@dataclass(frozen=True, slots=True)
class MigProfile:
    name: str
    profile_id: int  # NVML GPU-instance profile id
    compute_slices: int
    size: int  # memory-slice positions occupied
    memory_mib: int
    starts: tuple[int, ...]

    @property
    def media(self) -> bool:
        """A ``+me`` profile: it holds the card's media engines (one such instance a GPU)."""
        return self.name.endswith("+me")

    def mask(self, start: int) -> int:
        return (((1 << self.size) - 1) << start) | (MEDIA_BIT if self.media else 0)

    # what the scheduler asks of any partition profile (MIG here, Ascend vNPU in .vnpu)
    def fits(self, occupied: int, start: int) -> bool:
        return start in self.starts and not occupied & self.mask(start)

    def free(self, occupied: int) -> list[int]:
        """Legal starts that overlap nothing in the ``occupied`` mask."""
        return [s for s in self.starts if not occupied & self.mask(s)]

    def take(self, occupied: int, start: int) -> int:
        return occupied | self.mask(start)

    def room(self, occupied: int) -> int:
        """How many more instances fit: a profile's legal starts never overlap one another."""
        return len(self.free(occupied))

    def release(self, occupied: int, start: int) -> int:
        return occupied & ~self.mask(start)


@dataclass(frozen=True, slots=True)
class MigTable:
    model: str
    positions: int
    compute_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.profiles)
        raise SpecError(f"mig: {self.model} has no profile {name!r} (known: {known})", token=name)

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.profiles)

    def used(self, occupied: int) -> int:
        """Memory-slice positions taken."""
        return bin(occupied & (MEDIA_BIT - 1)).count("1")


_SEVEN = {  # placements shared by every 7-slice GPU (A100, H100, H200)
    "1g": (1, (0, 1, 2, 3, 4, 5, 6)),
    "1g+me": (1, (0, 1, 2, 3, 4, 5, 6)),
    "1g.2x": (2, (0, 2, 4, 6)),
    "2g": (2, (0, 2, 4)),
    "3g": (4, (0, 4)),
    "4g": (4, (0,)),
    "7g": (8, (0,)),
}
_IDS = {"1g": 19, "1g+me": 20, "1g.2x": 15, "2g": 14, "3g": 9, "4g": 5, "7g": 0}
_COMPUTE = {"1g": 1, "1g+me": 1, "1g.2x": 1, "2g": 2, "3g": 3, "4g": 4, "7g": 7}


def _seven_slice(model: str, names: dict[str, tuple[str, int]]) -> MigTable:
    profiles = tuple(
        MigProfile(name, _IDS[key], _COMPUTE[key], _SEVEN[key][0], mib, _SEVEN[key][1])
        for key, (name, mib) in names.items()
    )
    return MigTable(model, 8, 7, profiles)


def _gib(gib: float) -> int:
    return round(gib * 1024)


MIG_TABLES: dict[str, MigTable] = {
    "A100-40G": _seven_slice(
        "A100-40G",
        {
            "1g": ("1g.5gb", _gib(4.75)),
            "1g+me": ("1g.5gb+me", _gib(4.75)),
            "1g.2x": ("1g.10gb", _gib(9.75)),
            "2g": ("2g.10gb", _gib(9.75)),
            "3g": ("3g.20gb", _gib(19.625)),
            "4g": ("4g.20gb", _gib(19.625)),
            "7g": ("7g.40gb", _gib(39.25)),
        },
    ),
    "A100-80G": _seven_slice(
        "A100-80G",
        {
            "1g": ("1g.10gb", _gib(9.5)),
            "1g+me": ("1g.10gb+me", _gib(9.5)),
            "1g.2x": ("1g.20gb", _gib(19.5)),
            "2g": ("2g.20gb", _gib(19.5)),
            "3g": ("3g.40gb", _gib(39.25)),
            "4g": ("4g.40gb", _gib(39.25)),
            "7g": ("7g.80gb", _gib(79.0)),
        },
    ),
    "H100-80G": _seven_slice(
        "H100-80G",
        {
            "1g": ("1g.10gb", _gib(9.75)),
            "1g+me": ("1g.10gb+me", _gib(9.75)),
            "1g.2x": ("1g.20gb", _gib(19.625)),
            "2g": ("2g.20gb", _gib(19.625)),
            "3g": ("3g.40gb", _gib(39.5)),
            "4g": ("4g.40gb", _gib(39.5)),
            "7g": ("7g.80gb", _gib(79.25)),
        },
    ),
    "H200-141G": _seven_slice(
        "H200-141G",
        {
            "1g": ("1g.18gb", 18432),
            "1g+me": ("1g.18gb+me", 18432),
            "1g.2x": ("1g.35gb", 35840),
            "2g": ("2g.35gb", 35840),
            "3g": ("3g.71gb", 72704),
            "4g": ("4g.71gb", 72704),
            "7g": ("7g.141gb", 144384),
        },
    ),
    "A30-24G": MigTable(
        "A30-24G",
        4,
        4,
        (
            MigProfile("1g.6gb", 14, 1, 1, _gib(5.75), (0, 1, 2, 3)),
            MigProfile("1g.6gb+me", 21, 1, 1, _gib(5.75), (0, 1, 2, 3)),
            MigProfile("2g.12gb", 5, 2, 2, _gib(11.75), (0, 2)),
            MigProfile("2g.12gb+me", 6, 2, 2, _gib(11.75), (0, 2)),
            MigProfile("4g.24gb", 0, 4, 4, _gib(23.5), (0,)),
        ),
    ),
}


Profile = MigProfile | VnpuTemplate
# every partition table by model: NVIDIA MIG and Ascend vNPU (scheduled the same way)
TABLES: dict[str, MigTable | VnpuTable] = {**MIG_TABLES, **VNPU_TABLES}


def table_for(model: str) -> MigTable | VnpuTable | None:
    """The MIG or vNPU table of a device model, or None when the model cannot be cut."""
    return TABLES.get(canonical_model(model))


@cache
def models_with_profile(profile: str) -> tuple[str, ...]:
    """Every model that offers ``profile``; raises SpecError when none does."""
    models = tuple(m for m, t in TABLES.items() if t.has(profile))
    if not models:
        vnpu = profile.startswith("vir")
        tables = VNPU_TABLES if vnpu else MIG_TABLES
        known = sorted({p.name for t in tables.values() for p in t.profiles})
        what = (
            "vnpu: {!r} is not a template of any Ascend chip"
            if vnpu
            else ("mig: {!r} is not a profile of any MIG GPU")
        )
        raise SpecError(f"{what.format(profile)} (known: {', '.join(known)})", token=profile)
    return models


def free_starts(occupied: int, profile: Profile) -> list[int]:
    """Legal starts of ``profile`` that overlap nothing in the ``occupied`` mask."""
    return profile.free(occupied)


def _capacity_left(table: MigTable | VnpuTable, occupied: int) -> int:
    """How much room stays open for larger instances: counts placements still available,
    weighted by instance size so that keeping a 7g/4g/3g position free matters most."""
    return sum(
        p.size * len(free_starts(occupied, p)) for p in table.profiles if not p.name.endswith("+me")
    )


@cache
def choose_start(table: MigTable | VnpuTable, occupied: int, profile: Profile) -> int | None:
    """The legal free start that keeps the most room for other instances (lowest on ties).
    Cached: a table has at most 2^positions occupancy masks."""
    best: tuple[int, int] | None = None
    for start in free_starts(occupied, profile):
        left = _capacity_left(table, profile.take(occupied, start))
        if best is None or left > best[0]:
            best = (left, start)
    return None if best is None else best[1]


def starts_by_room(table: MigTable | VnpuTable, profile: Profile) -> list[int]:
    """A profile's legal starts on an empty card, the one keeping the most room first (the
    order ``choose_start`` prefers): a first-fit allocator reading placements in this order
    (kube-scheduler's DRA allocator) leaves 0-3 for a 4g when a 3g comes first."""
    return sorted(profile.starts, key=lambda s: (-_capacity_left(table, profile.take(0, s)), s))


def place(table: MigTable | VnpuTable, occupied: int, profile_name: str) -> tuple[int, int]:
    """Place one instance; returns (start, new occupied mask). Raises SpecError when full."""
    profile = table.profile(profile_name)
    start = choose_start(table, occupied, profile)
    if start is None:
        raise SpecError(f"mig: no free legal start for {profile_name} on {table.model}")
    return start, profile.take(occupied, start)


def plan_repartition(
    model: str, wanted: dict[str, int], keep: tuple[tuple[str, int], ...] = ()
) -> list[tuple[str, int]]:
    """Layout to create so that a GPU holds ``wanted`` instances (profile -> count).

    ``keep`` lists instances (profile, start) that must stay where they are (running work).
    Returns every instance of the new layout as (profile, start), kept ones included, sorted by
    start. Raises SpecError naming the request when no legal layout exists.
    """
    table = table_for(model)
    if table is None:
        raise SpecError(f"mig: {model} does not support MIG", token=model)
    occupied = 0
    layout: list[tuple[str, int]] = []
    for name, start in keep:
        p = table.profile(name)
        if not p.fits(occupied, start):
            raise SpecError(f"mig: kept instance {name}@{start} is not a legal free placement")
        occupied = p.take(occupied, start)
        layout.append((name, start))
    todo: list[Profile] = []
    for name, count in wanted.items():
        if count < 0:
            raise SpecError(f"mig: negative count for {name}")
        todo.extend([table.profile(name)] * count)
    todo.sort(key=lambda p: (-p.size, len(p.starts), p.name))
    if (
        sum(p.compute_slices for p in todo) + sum(table.profile(n).compute_slices for n, _ in keep)
        > table.compute_slices
    ):
        raise SpecError(f"mig: {_describe(wanted)} needs more than {table.compute_slices} slices")
    media = sum(1 for p in todo if p.name.endswith("+me")) + sum(
        1 for n, _ in keep if n.endswith("+me")
    )
    if media > 1:
        raise SpecError("mig: at most one +me (media extension) instance per GPU")
    placed = _search(todo, 0, occupied)
    if placed is None:
        raise SpecError(f"mig: no legal layout of {_describe(wanted)} on {table.model}")
    layout.extend((p.name, s) for p, s in zip(todo, placed, strict=True))
    return sorted(layout, key=lambda item: item[1])


def _search(todo: list[Profile], i: int, occupied: int) -> list[int] | None:
    if i == len(todo):
        return []
    for start in todo[i].free(occupied):
        rest = _search(todo, i + 1, todo[i].take(occupied, start))
        if rest is not None:
            return [start, *rest]
    return None


def _describe(wanted: dict[str, int]) -> str:
    return " + ".join(f"{n}x{p}" for p, n in wanted.items() if n)
