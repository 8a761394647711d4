"""Ascend vNPUs through ``npu-smi``: the vNPUs a chip already has (``npu-smi info -t
info-vnpu -i NPU -c CHIP``), and creating / destroying one (``npu-smi set -t create-vnpu`` /
``destroy-vnpu``). A vNPU is reported as a ``MigInstance``: its template, its slot (the vNPU
id is ``phy_id*16 + 100 + slot``) and ``vnpu<ID>`` as its id."""

import re
from dataclasses import dataclass, field

from gpupool.devices.base import DiscoveryError, MigInstance
from gpupool.devices.tools import run_tool
from gpupool.sharing.vnpu import VNPU_TABLES


@dataclass(frozen=True, slots=True)
class Vnpu:
    vnpu_id: int
    vgroup: int | None
    container: str
    status: int | None
    template: str

    @property
    def slot(self) -> int:
        return (self.vnpu_id - 100) % 16

    def instance(self, memory_mib: int = 0) -> MigInstance:
        return MigInstance(self.template, self.slot, f"vnpu{self.vnpu_id}", memory_mib)


@dataclass(slots=True)
class ChipVnpus:
    """What ``info-vnpu`` printed: resources as (free, total) — AI Cores, memory in GB, AI
    CPUs (None where it said NA) — and the vNPUs."""

    aicore: tuple[int, int] | None = None
    memory_gb: tuple[int, int] | None = None
    aicpu: tuple[int, int] | None = None
    vnpus: list[Vnpu] = field(default_factory=list)
    supported: bool = True  # False: npu-smi said the chip is not in a vNPU mode


def _pair(cell: str, what: str, line_no: int) -> tuple[int, int] | None:
    free, sep, total = cell.partition("/")
    if not sep:
        raise DiscoveryError(
            f"npu-smi info-vnpu: line {line_no}: {what} {cell!r} is not free/total"
        )
    if free == "NA" or total == "NA":
        return None
    if not (free.isdigit() and total.isdigit()) or int(free) > int(total):
        raise DiscoveryError(
            f"npu-smi info-vnpu: line {line_no}: {what} {cell!r} is not free/total"
        )
    return int(free), int(total)


def parse_info_vnpu(text: str) -> ChipVnpus:
    """Parse ``npu-smi info -t info-vnpu -i NPU -c CHIP``; garbage is a ``DiscoveryError``
    naming the line."""
    out = ChipVnpus()
    header = listed = False
    expected: int | None = None
    if "does not support" in text and "AICORE" not in text:
        # "The vnpu is not in docker mode, ..." / "NPU is working in SMP mode, ..."
        return ChipVnpus(supported=False)
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip().strip("|").strip()
        if not line or set(line) <= set("+-=|"):
            continue
        words = line.split()
        if words[0] == "AICORE":
            header = True
            continue
        if header and out.aicore is None and words != ["GB"]:
            if len(words) < 3:
                raise DiscoveryError(f"npu-smi info-vnpu: line {no}: too few resource columns")
            out.aicore = _pair(words[0], "AICORE", no)
            out.memory_gb = _pair(words[1], "Memory", no)
            out.aicpu = _pair(words[2], "AICPU", no)
            continue
        if line.startswith("Total number of vnpu"):
            count = line.rpartition(":")[2].strip()
            if not count.isdigit():
                raise DiscoveryError(f"npu-smi info-vnpu: line {no}: vNPU count {count!r}")
            expected = int(count)
            continue
        if line.startswith("Vnpu ID"):
            listed = True
            continue
        if listed:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) != 5 or not cells[0].isdigit() or not re.fullmatch(r"vir\w+", cells[4]):
                raise DiscoveryError(f"npu-smi info-vnpu: line {no}: not a vNPU row: {raw!r}")
            out.vnpus.append(
                Vnpu(
                    int(cells[0]),
                    int(cells[1]) if cells[1].isdigit() else None,
                    cells[2],
                    int(cells[3]) if cells[3].isdigit() else None,
                    cells[4],
                )
            )
    if out.aicore is None:
        raise DiscoveryError("npu-smi info-vnpu: no resource line (AICORE free/total) found")
    if expected is not None and expected != len(out.vnpus):
        raise DiscoveryError(f"npu-smi info-vnpu: says {expected} vNPUs but lists {len(out.vnpus)}")
    return out


def _ids(uuid: str) -> tuple[int, int]:
    """NPU and chip ids from an Ascend device's uuid (``npu3-chip0``)."""
    m = re.fullmatch(r"npu(\d+)-chip(\d+)", uuid)
    if m is None:
        raise DiscoveryError(f"npu-smi: {uuid!r} is not an npuN-chipM device id")
    return int(m.group(1)), int(m.group(2))


class VnpuControl:
    """vNPUs of the chips an ``npu-smi info`` discovery found (``uuid`` ``npuN-chipM``)."""

    def __init__(self, uuids: dict[int, str]):
        self.uuids = uuids  # local_index -> npuN-chipM

    def vnpus(self, local_index: int, model: str) -> tuple[MigInstance, ...]:
        """The vNPUs a chip has now (none asked of a chip without vNPU templates)."""
        table = VNPU_TABLES.get(model)
        if table is None:
            return ()
        return tuple(
            v.instance(table.profile(v.template).memory_mib if table.has(v.template) else 0)
            for v in self._listed(*_ids(self.uuids[local_index]))
        )

    def create_vnpu(self, local_index: int, template: str) -> MigInstance:
        """Create one; npu-smi answers "Create vnpu success" without the id it chose, so the
        new vNPU is the one listed after and not before."""
        npu, chip = _ids(self.uuids[local_index])
        before = {v.vnpu_id for v in self._listed(npu, chip)}
        run_tool(
            ["npu-smi", "set", "-t", "create-vnpu", "-i", str(npu), "-c", str(chip), "-f", template]
        )
        made = [v for v in self._listed(npu, chip) if v.vnpu_id not in before]
        if len(made) != 1 or made[0].template != template:
            raise DiscoveryError(f"npu-smi create-vnpu {template}: no new {template} afterwards")
        return made[0].instance()

    def destroy_vnpu(self, local_index: int, uuid: str) -> None:
        npu, chip = _ids(self.uuids[local_index])
        vid = uuid.removeprefix("vnpu")
        if not vid.isdigit():
            raise DiscoveryError(f"npu-smi destroy-vnpu: {uuid!r} is not a vNPU id")
        run_tool(
            ["npu-smi", "set", "-t", "destroy-vnpu", "-i", str(npu), "-c", str(chip), "-v", vid]
        )

    def _listed(self, npu: int, chip: int) -> list[Vnpu]:
        text = run_tool(["npu-smi", "info", "-t", "info-vnpu", "-i", str(npu), "-c", str(chip)])
        return parse_info_vnpu(text).vnpus
