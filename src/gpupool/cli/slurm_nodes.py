"""Nodes as ``sinfo -o "%P %a %l %D %t %N"`` prints them: the fields by letter, and sinfo's
lines — one per group of nodes alike in every field printed but the aggregates (``%D`` their
count, ``%N`` their compressed list, ``%C`` their CPUs summed), or one per node with ``-N``.
Values are Slurm's words (``idle``, ``mix``, ``alloc``, ``drain``, ``drng``, ``down*``), from
the API's nodes. Pure."""

from collections.abc import Sequence
from typing import Any

from gpupool.cli import slurm_format as fmt
from gpupool.cli.slurm_format import Column
from gpupool.cli.slurm_jobs import PARTITION, never
from gpupool.model.hostlist import compress

AGGREGATES = {"D", "N", "n", "C"}  # computed over a group, not what groups the nodes
Group = list[dict[str, Any]]  # the API's nodes of one line


def states(node: dict[str, Any]) -> tuple[str, str]:
    """sinfo's (``%t``, ``%T``) for a node: a silent agent is ``down*`` (not responding), one
    back but not reconciled ``down``, a drained node ``drain`` or, with work still on it,
    ``drng`` (draining); else idle, mix or alloc by the cards (or CPUs) held."""
    held, cpu = len(set(node["devices_in_use"])), node["cpu_allocated_millis"]
    if node["state"] == "lost":
        return "down*", "down*"
    if node["state"] == "fenced":
        return "down", "down"
    if not node["schedulable"]:
        return ("drng", "draining") if held or cpu else ("drain", "drained")
    total = len(node["devices"])
    used, whole = (held, total) if total else (cpu, node["cpu_millis"])
    if used == 0:
        return "idle", "idle"
    return ("alloc", "allocated") if used >= whole else ("mix", "mixed")


def gres(node: dict[str, Any]) -> str:
    """``gpu:A100-80G:4`` (a model a count), comma-separated; ``(null)`` without cards."""
    models: dict[str, int] = {}
    for d in node["devices"]:
        models[d["model"]] = models.get(d["model"], 0) + 1
    return ",".join(f"gpu:{m}:{c}" for m, c in sorted(models.items())) or "(null)"


def features(node: dict[str, Any]) -> str:
    """``%f``: the node's card models, what ``sbatch -C`` matches here; ``(null)``: none."""
    return ",".join(sorted({d["model"] for d in node["devices"]})) or "(null)"


def _cpus(group: Group) -> str:
    """``%C``: CPUs allocated/idle/other/total; other: those of nodes down or drained."""
    alloc = idle = other = total = 0
    for n in group:
        cores = n["cpu_millis"] // 1000
        used = -(-n["cpu_allocated_millis"] // 1000)
        total += cores
        if n["state"] in ("lost", "fenced") or not n["schedulable"]:
            other += cores - used
            alloc += used
        else:
            alloc, idle = alloc + used, idle + cores - used
    return f"{alloc}/{idle}/{other}/{total}"


def sinfo_columns() -> dict[str, Column]:
    """sinfo's fields by ``-o`` letter; each value is of a group (its first node, for what
    groups them)."""

    def first(f: Any) -> Any:
        return lambda g: f(g[0])

    return {
        "P": Column("PARTITION", lambda g: PARTITION + "*"),  # the default partition
        "R": Column("PARTITION", lambda g: PARTITION),
        "a": Column("AVAIL", lambda g: "up"),
        "l": Column("TIMELIMIT", lambda g: "infinite"),
        "D": Column("NODES", lambda g: str(len(g))),
        "t": Column("STATE", first(lambda n: states(n)[0])),
        "T": Column("STATE", first(lambda n: states(n)[1])),
        "N": Column("NODELIST", lambda g: compress([n["name"] for n in g]), cut=never),
        "n": Column("HOSTNAMES", lambda g: " ".join(n["name"] for n in g), cut=never),
        "G": Column("GRES", first(gres)),
        "c": Column("CPUS", first(lambda n: str(n["cpu_millis"] // 1000))),
        "C": Column("CPUS(A/I/O/T)", _cpus),
        "m": Column("MEMORY", first(lambda n: str(n["memory_mib"]))),
        "e": Column("FREE_MEM", first(lambda n: str(n["memory_mib"] - n["mem_allocated_mib"]))),
        "E": Column("REASON", first(lambda n: n.get("drain_reason") or "none")),
        "O": Column("CPU_LOAD", lambda g: "N/A"),  # no load average is reported
        # what -C/--constraint matches here: the node's card models
        "f": Column("AVAIL_FEATURES", first(features)),
    }


def sinfo_lines(
    nodes: Sequence[dict[str, Any]], percent: str, header: bool, node_oriented: bool
) -> list[str]:
    """``nodes -o "%P %a %l %D %t %N"``: sinfo's lines; ``node_oriented``: ``-N``."""
    columns = sinfo_columns()
    prefix, fields = fmt.parse_percent(percent, columns, "--format")
    ordered = sorted(nodes, key=lambda n: n["name"])
    if node_oriented:
        groups = [[n] for n in ordered]
    else:
        keyed: dict[tuple[str, ...], Group] = {}
        for n in ordered:
            key = tuple(columns[f.key].value([n]) for f in fields if f.key not in AGGREGATES)
            keyed.setdefault(key, []).append(n)
        groups = list(keyed.values())
    return fmt.render(groups, prefix, fields, columns, header=header)
