"""Ascend vNPU templates (CANN's "virtual instance", 算力切分): a chip cut into vNPUs by fixed
templates, each taking AI Cores, AI CPUs and memory from the chip.

Unlike MIG there are no positions: a chip holds any set of templates whose AI Cores and AI
CPUs add up to at most the chip's. Memory is proportional to AI Cores in every template, so it
never binds on its own. On the 310P, vNPUs live in at most four vGroups of at least two AI
Cores; a ``vir01`` (one core) shares its vGroup with at most one other ``vir01``, so a lone
``vir01`` holds two cores.

Sources (public): Huawei MindCluster, "Virtualization Rules" / 虚拟化实例 (templates, the vNPU
type names such as ``Ascend910-10c.3cpu.32g``, vGroups on Atlas inference products, vNPU ids
``phy_id*16+100`` … ``+107``); the template lists ``npu-smi set -t create-vnpu`` prints per
board; HAMi's ascend device-plugin configuration (AI Core, AI CPU and memory per template and
per chip: 910B2 24 cores / 6 AI CPUs, 910B3 and 910B4 20 / 7, 310P 8 / 7).

The occupancy of a chip is one small integer (it indexes the scheduler's per-state lookup
tables, as a MIG position mask does): bits 0-3 the core units used, bits 4-6 the AI CPUs
used, bit 7 a half-filled ``vir01`` vGroup.
"""

from dataclasses import dataclass

from gpupool.model import SpecError

_UNITS = 0xF
_CPU_SHIFT = 4
_CPUS = 0x7
_HALF = 1 << 7
MAX_VNPUS_PER_CHIP = 8  # vNPU ids phy_id*16+100 .. phy_id*16+107


def _split(occupied: int) -> tuple[int, int, bool]:
    return occupied & _UNITS, (occupied >> _CPU_SHIFT) & _CPUS, bool(occupied & _HALF)


def _join(units: int, cpus: int, half: bool) -> int:
    return units | (cpus << _CPU_SHIFT) | (_HALF if half else 0)


@dataclass(frozen=True, slots=True)
class VnpuTemplate:
    """One template on one chip model. Behaves as a MIG profile for the scheduler: one legal
    "start" (0), since vNPUs have no position."""

    name: str  # npu-smi's template name, e.g. vir10_3c_32g
    compute_slices: int  # AI Cores
    ai_cpu: int
    memory_mib: int
    units: int  # core units of the chip it takes (a vir01 pair shares two)
    vnpu_type: str  # the device type the vNPU appears as, e.g. Ascend910-10c.3cpu.32g
    unit_limit: int
    cpu_limit: int
    pairs: bool = False  # a 310P vir01: two share one vGroup

    profile_id = 0
    starts = (0,)
    media = False

    @property
    def size(self) -> int:
        return self.units

    def _after(self, occupied: int, sign: int) -> tuple[int, int, bool]:
        units, cpus, half = _split(occupied)
        cpus += sign * self.ai_cpu
        if not self.pairs:
            return units + sign * self.units, cpus, half
        if sign > 0:  # the first of a pair opens a two-core vGroup; the second fills it
            return (units, cpus, False) if half else (units + 2, cpus, True)
        return (units - 2, cpus, False) if half else (units, cpus, True)

    def fits(self, occupied: int, start: int = 0) -> bool:
        units, cpus, _ = self._after(occupied, 1)
        # the start is the vNPU's slot on the node (any; the scheduler says 0): not a position
        in_range = 0 <= start < MAX_VNPUS_PER_CHIP
        return in_range and units <= self.unit_limit and cpus <= self.cpu_limit

    def free(self, occupied: int) -> list[int]:
        return [0] if self.fits(occupied) else []

    def room(self, occupied: int) -> int:
        """How many more of this template fit beside what the chip holds."""
        count = 0
        while count < MAX_VNPUS_PER_CHIP and self.fits(occupied):
            occupied, count = self.take(occupied), count + 1
        return count

    def take(self, occupied: int, start: int = 0) -> int:
        if not self.fits(occupied, start):
            raise SpecError(f"vnpu: {self.name} does not fit beside what the chip holds")
        return _join(*self._after(occupied, 1))

    def release(self, occupied: int, start: int = 0) -> int:
        units, cpus, half = self._after(occupied, -1)
        if units < 0 or cpus < 0:
            raise SpecError(f"vnpu: the chip holds no {self.name} to release")
        return _join(units, cpus, half)


@dataclass(frozen=True, slots=True)
class VnpuTable:
    model: str
    compute_slices: int  # AI Cores of the chip
    ai_cpu: int
    memory_mib: int
    unit_cores: int  # AI Cores in one unit (the smallest template's, 310P: one)
    profiles: tuple[VnpuTemplate, ...]

    @property
    def positions(self) -> int:
        return self.compute_slices // self.unit_cores

    def profile(self, name: str) -> VnpuTemplate:
        for p in self.profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.profiles)
        raise SpecError(f"vnpu: {self.model} has no template {name!r} (known: {known})", token=name)

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.profiles)

    def used(self, occupied: int) -> int:
        """Core units taken (a half-filled vir01 vGroup counts whole)."""
        return _split(occupied)[0]

    def holds(self, names: list[str]) -> bool:
        """Whether one chip can hold all these templates at once."""
        occupied = 0
        for name in names:
            p = self.profile(name)
            if not p.fits(occupied):
                return False
            occupied = p.take(occupied)
        return len(names) <= MAX_VNPUS_PER_CHIP


def _table(
    model: str,
    cores: int,
    ai_cpu: int,
    memory_mib: int,
    unit_cores: int,
    templates: list[tuple[str, int, int, int, str]],
    pairs: str = "",
) -> VnpuTable:
    limit = cores // unit_cores
    return VnpuTable(
        model,
        cores,
        ai_cpu,
        memory_mib,
        unit_cores,
        tuple(
            VnpuTemplate(
                name, c, cpu, mib, max(1, c // unit_cores), kind, limit, ai_cpu, name == pairs
            )
            for name, c, cpu, mib, kind in templates
        ),
    )


_GIB = 1024
VNPU_TABLES: dict[str, VnpuTable] = {
    t.model: t
    for t in (
        _table(  # Atlas 800T A2 / 900 A2 PoD, 910B2 chips (HAMi: aiCore 24, aiCPU 6)
            "Ascend910B-B2",
            24,
            6,
            64 * _GIB,
            3,
            [
                ("vir03_1c_8g", 3, 1, 8 * _GIB, "Ascend910-3c.1cpu.8g"),
                ("vir06_1c_16g", 6, 1, 16 * _GIB, "Ascend910-6c.1cpu.16g"),
                ("vir12_3c_32g", 12, 3, 32 * _GIB, "Ascend910-12c.3cpu.32g"),
            ],
        ),
        _table(  # Atlas 800T A2, 910B3 chips
            "Ascend910B-B3",
            20,
            7,
            64 * _GIB,
            5,
            [
                ("vir05_1c_16g", 5, 1, 16 * _GIB, "Ascend910-5c.1cpu.16g"),
                ("vir10_3c_32g", 10, 3, 32 * _GIB, "Ascend910-10c.3cpu.32g"),
            ],
        ),
        _table(  # Atlas 800I A2 (inference), 910B4 chips, 32 GB
            "Ascend910B-B4",
            20,
            7,
            32 * _GIB,
            5,
            [
                ("vir05_1c_8g", 5, 1, 8 * _GIB, "Ascend910-5c.1cpu.8g"),
                ("vir10_3c_16g", 10, 3, 16 * _GIB, "Ascend910-10c.3cpu.16g"),
            ],
        ),
        _table(  # Atlas 300I Pro / 300V: 310P, 8 AI Cores, 7 AI CPUs, vGroups of >= 2 cores
            "Ascend310P",
            8,
            7,
            24 * _GIB,
            1,
            [
                ("vir01", 1, 1, 3 * _GIB, "Ascend310P-1c"),
                ("vir02", 2, 2, 6 * _GIB, "Ascend310P-2c"),
                ("vir02_1c", 2, 1, 6 * _GIB, "Ascend310P-2c.1cpu"),
                ("vir04", 4, 4, 12 * _GIB, "Ascend310P-4c"),
                ("vir04_3c", 4, 3, 12 * _GIB, "Ascend310P-4c.3cpu"),
            ],
            pairs="vir01",
        ),
    )
}


def vnpu_id(phy_id: int, slot: int) -> int:
    """The vNPU id npu-smi gives the ``slot``-th vNPU of chip ``phy_id`` (``-v``)."""
    if not 0 <= slot < MAX_VNPUS_PER_CHIP:
        raise SpecError(f"vnpu: slot {slot} out of range 0..{MAX_VNPUS_PER_CHIP - 1}")
    return phy_id * 16 + 100 + slot
