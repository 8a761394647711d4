"""What ``translate`` reads a script's sbatch options through: the options as sbatch keeps them
(a later one wins), the site's tables, and every refusal found on the way — so a script is
checked whole and told everything gpupool cannot honour at once, the most fundamental first:
the script itself (a heterogeneous job, an unknown option), then resources (nodes, tasks,
GPUs, CPUs, memory), then placement and timing, then files, then the site's names
(partition, account, QOS). Pure."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gpupool.model.errors import SpecError
from gpupool.model.sbatch_options import Option

SCRIPT, RESOURCES, PLACEMENT, FILES, SITE = range(5)
T = TypeVar("T")
# the refused options that are about resources or layout, and those about the site's names;
# the others are about placement and timing
RESOURCE_OPTIONS = frozenset({
    "threads-per-core", "sockets-per-node", "cores-per-socket", "ntasks-per-core",
    "ntasks-per-socket", "ntasks-per-gpu", "mincpus", "tres-per-task", "tmp", "licenses",
    "core-spec", "thread-spec", "oversubscribe", "overcommit", "gpu-bind", "gpu-freq",
    "cpu-freq", "mem-bind", "distribution", "network", "contiguous", "spread-job",
    "use-min-nodes", "extra-node-info", "container", "bb", "bbf", "power", "reboot",
    "delay-boot", "x11",
})  # fmt: skip
SITE_OPTIONS = frozenset(
    {"clusters", "wckey", "reservation", "prefer", "nice", "priority", "uid", "gid"}
)
FILE_OPTIONS = frozenset({"input", "output", "error", "chdir", "export", "get-user-env"})


def rank_of(name: str) -> int:
    if name in RESOURCE_OPTIONS:
        return RESOURCES
    if name in SITE_OPTIONS:
        return SITE
    if name in FILE_OPTIONS:
        return FILES
    return PLACEMENT


@dataclass(frozen=True)
class Refusal:
    rank: int
    text: str  # "train.sh: line 4: --exclusive=user is not supported: ..."
    field: str | None = None


@dataclass(frozen=True)
class Site:
    """How a site's Slurm names map to gpupool (``gpupool sbatch --site FILE``): a partition
    to a GPU model (``A100``, or "" for any card of the pool), a QOS to a priority class, an
    account to a tenant. An account or QOS not in its table is taken by name; a partition
    not in its table is refused (it would pick the nodes)."""

    partitions: dict[str, str] = field(default_factory=dict)
    qos: dict[str, str] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)


def _line(text: str) -> int:
    """A refusal's line in the script (the command line's come after every line)."""
    m = re.search(r": line (\d+)", text)
    return int(m[1]) if m else 1 << 30


class Plan:
    def __init__(self, options: list[Option], site: Site):
        self.site = site
        self.seen: dict[str, Option] = {}
        for opt in options:  # a later option wins, as sbatch reads them
            self.seen[opt.name] = opt
        self.refusals: list[Refusal] = []

    def get(self, name: str) -> str | None:
        opt = self.seen.get(name)
        return opt.value if opt else None

    def where(self, name: str) -> str:
        return self.seen[name].where

    def refuse(self, rank: int, text: str, field: str | None = None) -> None:
        self.refusals.append(Refusal(rank, text, field))

    def attempt(self, rank: int, step: Callable[[], T], fallback: T) -> T:
        """``step()``, or ``fallback`` with its refusal kept (the script is checked on)."""
        try:
            return step()
        except SpecError as exc:
            self.refuse(rank, str(exc), exc.field)
            return fallback

    def raise_refusals(self) -> None:
        """One error naming everything refused, the most fundamental first (then by line)."""
        if not self.refusals:
            return
        ranked = sorted(self.refusals, key=lambda r: (r.rank, _line(r.text)))
        texts = list(dict.fromkeys(r.text for r in ranked))
        if len(texts) == 1:
            raise SpecError(texts[0], field=ranked[0].field)
        raise SpecError(
            f"{len(texts)} things gpupool cannot honour, the most fundamental first: "
            + "; ".join(texts),
            field=ranked[0].field,
        )
