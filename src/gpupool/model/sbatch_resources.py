"""One node's resources from sbatch's options, as Slurm resolves them: nodes (``-N``, or as
many as ``-w`` names), tasks (``--ntasks`` over ``--ntasks-per-node``, which is then a
maximum per node), GPUs per node, CPUs, memory (``--mem=0``: all of a node's), and whole
nodes (``--exclusive``). Each raises a ``SpecError`` naming the option it cannot honour;
``translate`` collects them. Pure."""

import re
from dataclasses import dataclass

from gpupool.model.devices import CATALOG, canonical_model
from gpupool.model.errors import SpecError
from gpupool.model.hostlist import expand
from gpupool.model.sbatch_plan import Plan

_SIZE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_COUNT = re.compile(r"^(?:(?P<type>[A-Za-z0-9_.-]+):)?(?P<n>\d+)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
SIZE_MIB = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True)
class Layout:
    nodes: int  # distinct nodes
    tasks_per_node: int
    warnings: tuple[str, ...] = ()


def memory_mib(text: str, where: str) -> int:
    """Slurm's sizes: ``4096`` (MiB), ``10G``, ``512M``, ``1T``, ``20Gb``."""
    m = _SIZE.match(text.strip())
    if m is None:
        raise SpecError(f"{where}: {text!r} is not a size like 4096, 512M or 10G", field="mem")
    return int(-(-int(m[1]) * SIZE_MIB[m[2].upper()] // 1))


def positive(p: Plan, name: str) -> int | None:
    text = p.get(name)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise SpecError(f"{p.where(name)}: --{name}={text}: a positive number", field=name)
    return int(text)


def node_names(p: Plan, name: str) -> list[str] | None:
    """``-w``/``-x``'s hosts (``n[01-04],gpu7``); a file of names (a path) is refused."""
    text = p.get(name)
    if text is None:
        return None
    if "/" in text:
        raise SpecError(
            f"{p.where(name)}: --{name}={text}: a file of node names is not read here; give "
            "the names (n[01-04],gpu7)",
            field=name,
        )
    try:
        return expand(text, name)
    except SpecError as exc:
        raise SpecError(f"{p.where(name)}: --{name}: {exc}", field=name) from None


def nodes_asked(p: Plan, named: int) -> int | None:
    """``-N``'s count (None when not given); a range is refused; fewer than ``-w`` names is
    refused (the job holds every node it names)."""
    text = p.get("nodes")
    if text is None:
        return None
    m = _RANGE.match(text.strip())
    if m is None or int(m[1]) < 1:
        raise SpecError(f"{p.where('nodes')}: --nodes={text}: N or N-N nodes", field="nodes")
    if m[2] is not None and m[2] != m[1]:
        raise SpecError(
            f"{p.where('nodes')}: --nodes={text}: a range of node counts is not supported "
            "(gpupool starts a job on a fixed number of nodes)",
            field="nodes",
        )
    if named > int(m[1]):
        raise SpecError(
            f"{p.where('nodes')}: --nodes={text} with --nodelist naming {named} nodes: a job "
            "holds every node it names (Slurm refuses it too)",
            field="nodes",
        )
    return int(m[1])


def layout(p: Plan, asked: int | None, named: int) -> Layout:
    """Nodes and tasks per node as Slurm resolves them: ``--ntasks`` wins over
    ``--ntasks-per-node``, which is then the most tasks a node runs (nodes not given: as
    many as that takes); fewer tasks than ``-N`` nodes runs on as many nodes as tasks (with
    Slurm's warning). gpupool runs the same number of tasks on each node: a total that does
    not split evenly is refused."""
    per_node = positive(p, "ntasks-per-node")
    total = positive(p, "ntasks")
    nodes = asked if asked is not None else max(named, 1)
    if total is None:
        return Layout(nodes, per_node or 1)
    warnings: tuple[str, ...] = ()
    if asked is None and per_node is not None:
        nodes = max(nodes, -(-total // per_node))
    elif total < nodes and named <= total:
        warnings = (
            f"{p.where('ntasks')}: can't run {total} processes on {nodes} nodes, setting "
            f"nnodes to {total} (as sbatch does)",
        )
        nodes = total
    if total % nodes:
        hint = "" if per_node is not None else "; give --ntasks-per-node"
        raise SpecError(
            f"{p.where('ntasks')}: --ntasks={total} over {nodes} nodes does not split evenly "
            f"(gpupool runs as many tasks on each node){hint}",
            field="ntasks",
        )
    if per_node is not None and total // nodes > per_node:
        raise SpecError(
            f"{p.where('ntasks')}: --ntasks={total} is more than --ntasks-per-node={per_node} "
            f"on each of {nodes} nodes (Slurm refuses it too)",
            field="ntasks",
        )
    return Layout(nodes, total // nodes, warnings)


def _count(text: str, where: str) -> tuple[str | None, int]:
    m = _COUNT.match(text.strip())
    if m is None:
        raise SpecError(f"{where}: {text!r} is not [TYPE:]COUNT", field="gpu")
    return m["type"], int(m["n"])


def _gres(text: str, where: str) -> tuple[str | None, int]:
    """``--gres=gpu:2``, ``gpu:a100:4``, ``gpu`` (one); any other resource is refused."""
    kinds: list[tuple[str | None, int]] = []
    for part in text.split(","):
        name, _, rest = part.strip().partition(":")
        if name != "gpu":
            raise SpecError(f"{where}: --gres={part}: gpupool knows only gpu", field="gres")
        kinds.append(_count(rest, where) if rest else (None, 1))
    if len(kinds) != 1:
        raise SpecError(f"{where}: --gres={text}: one gpu entry, please", field="gres")
    return kinds[0]


def model_of(slurm_type: str | None, where: str) -> str | None:
    """A Slurm GPU type (``a100``, ``v100``, ``a100_80gb``, ``v100-32``) as a catalog model
    or family; a type nobody's catalog has is refused (it would pick the nodes)."""
    if slurm_type is None:
        return None
    name = canonical_model(slurm_type).upper()
    models = [e.name for e in CATALOG.values()]
    families = {m.split("-")[0].upper(): m.split("-")[0] for m in models}
    if name in CATALOG:
        return CATALOG[name].name
    if name in families:
        return families[name]
    longer = [m for m in models if m.upper().startswith(name)]
    if len(longer) == 1:  # v100-32: V100-32G
        return longer[0]
    raise SpecError(f"{where}: GPU type {slurm_type!r} is no model gpupool knows", field="gpu")


def gpus(p: Plan, nodes: int, tasks_per_node: int) -> tuple[str | None, int]:
    """The GPU model and count per node, from whichever GPU option the script used."""
    # a resource gpupool lacks is named before a second way of asking for GPUs
    gres = _gres(p.get("gres") or "", p.where("gres")) if p.get("gres") else None
    given = [n for n in ("gres", "gpus", "gpus-per-node", "gpus-per-task") if p.get(n)]
    if len(given) > 1:
        names = ", ".join(f"--{n}" for n in given)
        raise SpecError(f"{p.where(given[1])}: {names}: ask for GPUs one way", field="gpu")
    if not given:
        return None, 0
    name = given[0]
    where, text = p.where(name), p.get(name) or ""
    slurm_type, count = gres if name == "gres" and gres else _count(text, where)
    if name == "gpus":  # for the whole job: an even share per node
        if count % nodes:
            raise SpecError(
                f"{where}: --gpus={text} over {nodes} nodes does not split evenly; give "
                "--gpus-per-node",
                field="gpu",
            )
        count //= nodes
    if name == "gpus-per-task":
        count *= tasks_per_node
    return model_of(slurm_type, where), count


def memory(p: Plan, cpus: int, gpus: int) -> tuple[int | None, bool]:
    """(MiB per node or None for gpupool's default, all of the node's: ``--mem=0``)."""
    given = [n for n in ("mem", "mem-per-cpu", "mem-per-gpu") if p.get(n) is not None]
    if len(given) > 1:
        names = ", ".join(f"--{n}" for n in given)
        raise SpecError(f"{p.where(given[1])}: {names}: ask for memory one way", field="mem")
    if not given:
        return None, False  # gpupool's default: the job's share of its node (docs/security.md)
    name = given[0]
    size = memory_mib(p.get(name) or "", p.where(name))
    if name == "mem" and size == 0:
        return None, True  # Slurm: all of the memory of each node
    if name == "mem-per-gpu" and not gpus:
        raise SpecError(f"{p.where(name)}: --mem-per-gpu without GPUs", field="mem")
    return size * {"mem": 1, "mem-per-cpu": cpus, "mem-per-gpu": gpus}[name], False


def exclusive(p: Plan) -> bool:
    """``--exclusive``: whole nodes; ``=user``, ``=mcs``, ``=topo`` are refused by name."""
    if "exclusive" not in p.seen:
        return False
    value = p.get("exclusive")
    if value is None:
        return True
    raise SpecError(
        f"{p.where('exclusive')}: --exclusive={value} is not supported: gpupool keeps no node "
        "for one user's (or label's, or segment's) jobs; --exclusive alone gives the job whole "
        "nodes",
        field="exclusive",
    )
