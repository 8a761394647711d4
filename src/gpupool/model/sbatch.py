"""A batch script's sbatch options as a gpupool job, with Slurm's meaning: ``-N`` nodes are
distinct nodes (a gang, one worker a node), GPUs per node from ``--gres=gpu[:type]:N``,
``--gpus[-per-node|-per-task]`` or ``-G``, CPUs from tasks × CPUs per task (or per GPU),
memory in Slurm's units (a bare number is MiB; K, M, G, T are powers of 1,024) per node or per
CPU or GPU, ``--time``, ``--array`` with ``%N``, ``--job-name``, ``--output``/``--error``,
``--dependency``, ``--chdir``, ``--hold``, ``--account`` → tenant, ``--qos`` → priority class,
``--partition`` and ``--constraint`` through the site's tables or the card models. What
gpupool cannot honour is refused naming it (``sbatch_options.REFUSED``); what cannot change
where or how the job runs is accepted with a warning naming it. Pure."""

import re
from dataclasses import dataclass, field

from gpupool.model.batch import check_output_path, parse_array, parse_dependency, parse_time
from gpupool.model.checkpoint import parse_sbatch_signal
from gpupool.model.devices import CATALOG, canonical_model
from gpupool.model.errors import SpecError
from gpupool.model.sbatch_options import NO_EFFECT, REFUSED, Option

_SIZE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_COUNT = re.compile(r"^(?:(?P<type>[A-Za-z0-9_.-]+):)?(?P<n>\d+)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
SIZE_MIB = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True)
class Site:
    """How a site's Slurm names map to gpupool (``gpupool sbatch --site FILE``): a partition
    to a GPU model (``A100``, or "" for any card of the pool), a QOS to a priority class, an
    account to a tenant. An account or QOS not in its table is taken by name; a partition
    not in its table is refused (it would pick the nodes)."""

    partitions: dict[str, str] = field(default_factory=dict)
    qos: dict[str, str] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)


@dataclass
class SbatchJob:
    request: str  # one node's share (a gang worker's)
    nodes: int = 1  # distinct nodes: the gang's size
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    time_s: int | None = None
    name: str | None = None
    array: str | None = None
    output: str | None = None
    error: str | None = None
    dependency: list[dict[str, object]] = field(default_factory=list)
    chdir: str | None = None
    hold: bool = False
    wait: bool = False
    tenant: str | None = None
    priority_class: str | None = None
    partition: str | None = None
    export: str = "ALL"
    env: dict[str, str] = field(default_factory=dict)  # SLURM_* known at submission
    warnings: list[str] = field(default_factory=list)
    checkpoint: dict[str, object] | None = None  # --signal: what it saves on (model.checkpoint)


def memory_mib(text: str, where: str) -> int:
    """Slurm's sizes: ``4096`` (MiB), ``10G``, ``512M``, ``1T``, ``20Gb``."""
    m = _SIZE.match(text.strip())
    if m is None:
        raise SpecError(f"{where}: {text!r} is not a size like 4096, 512M or 10G", field="mem")
    return int(-(-int(m[1]) * SIZE_MIB[m[2].upper()] // 1))


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


def _model(slurm_type: str | None, where: str) -> str | None:
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


class _Plan:
    def __init__(self, options: list[Option], site: Site):
        self.site = site
        self.seen: dict[str, Option] = {}
        for opt in options:  # a later option wins, as sbatch reads them
            self.seen[opt.name] = opt

    def get(self, name: str) -> str | None:
        opt = self.seen.get(name)
        return opt.value if opt else None

    def where(self, name: str) -> str:
        return self.seen[name].where


def translate(options: list[Option], site: Site | None = None) -> SbatchJob:
    """The gpupool job the options describe, or a ``SpecError`` naming the first option that
    gpupool cannot honour."""
    p = _Plan(options, site or Site())
    warnings: list[str] = []
    for name, opt in p.seen.items():
        if name in REFUSED:
            why = REFUSED[name] or "gpupool has no such thing"
            raise SpecError(f"{opt.where}: --{name} is not supported: {why}", field=name)
        if name in NO_EFFECT:
            warnings.append(f"{opt.where}: --{name} has no effect here"
                            + (f" ({NO_EFFECT[name]})" if NO_EFFECT[name] else ""))  # fmt: skip
    nodes = _nodes(p)
    model, gpus = _gpus(p, nodes)
    tasks = _tasks(p, nodes, gpus)
    cpt = _positive(p, "cpus-per-task") or 1
    cpus = tasks * cpt
    if p.get("cpus-per-gpu") is not None:
        cpus = max(cpus, (_positive(p, "cpus-per-gpu") or 1) * gpus)
    mem = _memory(p, cpus, gpus)
    parts = [f"gpu={model}:{gpus}" if model else f"gpu={gpus}"] if gpus else []
    parts.append(f"cpu={cpus}")
    if mem is not None:
        parts.append(f"mem={mem}MiB")
    partition = p.get("partition")
    if partition is not None:
        model = _partition(p, partition, model)
        if gpus and model:
            parts[0] = f"gpu={model}:{gpus}"
    constraint = p.get("constraint")
    if constraint is not None:
        parts = _constrained(p, constraint, parts, gpus)
    job = SbatchJob(request=",".join(parts), nodes=nodes, tasks_per_node=tasks,
                    cpus_per_task=cpt, gpus_per_node=gpus, warnings=warnings)  # fmt: skip
    _scalars(p, job)
    job.env = {
        "SLURM_NTASKS": str(tasks * nodes), "SLURM_NTASKS_PER_NODE": str(tasks),
        "SLURM_CPUS_PER_TASK": str(cpt), "SLURM_NNODES": str(nodes),
        "SLURM_JOB_NUM_NODES": str(nodes),
        **({"SLURM_GPUS_PER_NODE": str(gpus), "SLURM_GPUS_ON_NODE": str(gpus)} if gpus else {}),
        **({"SLURM_JOB_PARTITION": partition} if partition else {}),
    }  # fmt: skip
    return job


def _positive(p: _Plan, name: str) -> int | None:
    text = p.get(name)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise SpecError(f"{p.where(name)}: --{name}={text}: a positive number", field=name)
    return int(text)


def _nodes(p: _Plan) -> int:
    text = p.get("nodes")
    if text is None:
        return 1
    m = _RANGE.match(text.strip())
    if m is None or int(m[1]) < 1:
        raise SpecError(f"{p.where('nodes')}: --nodes={text}: N or N-N nodes", field="nodes")
    if m[2] is not None and m[2] != m[1]:
        raise SpecError(
            f"{p.where('nodes')}: --nodes={text}: a range of node counts is not supported "
            "(gpupool starts a job on a fixed number of nodes)",
            field="nodes",
        )
    return int(m[1])


def _gpus(p: _Plan, nodes: int) -> tuple[str | None, int]:
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
        tasks = _positive(p, "ntasks-per-node") or 1
        count *= tasks
    return _model(slurm_type, where), count


def _tasks(p: _Plan, nodes: int, gpus: int) -> int:
    per_node = _positive(p, "ntasks-per-node")
    total = _positive(p, "ntasks")
    if per_node is not None:
        if total is not None and total != per_node * nodes:
            raise SpecError(
                f"{p.where('ntasks')}: --ntasks={total} is not --ntasks-per-node={per_node} × "
                f"{nodes} nodes",
                field="ntasks",
            )
        return per_node
    if total is None:
        return 1
    if total % nodes:
        raise SpecError(
            f"{p.where('ntasks')}: --ntasks={total} over {nodes} nodes does not split evenly; "
            "give --ntasks-per-node",
            field="ntasks",
        )
    return total // nodes


def _memory(p: _Plan, cpus: int, gpus: int) -> int | None:
    given = [n for n in ("mem", "mem-per-cpu", "mem-per-gpu") if p.get(n) is not None]
    if len(given) > 1:
        names = ", ".join(f"--{n}" for n in given)
        raise SpecError(f"{p.where(given[1])}: {names}: ask for memory one way", field="mem")
    if not given:
        return None  # gpupool's default: the job's share of its node (docs/security.md)
    name = given[0]
    size = memory_mib(p.get(name) or "", p.where(name))
    if name == "mem" and size == 0:
        raise SpecError(
            f"{p.where(name)}: --mem=0 (all of a node's memory) is not supported: gpupool "
            "shares nodes; give a size, or leave it out for the job's share of its node",
            field="mem",
        )
    if name == "mem-per-gpu" and not gpus:
        raise SpecError(f"{p.where(name)}: --mem-per-gpu without GPUs", field="mem")
    return size * {"mem": 1, "mem-per-cpu": cpus, "mem-per-gpu": gpus}[name]


def _partition(p: _Plan, partition: str, model: str | None) -> str | None:
    """The GPU model the job may use: its own, or its partition's."""
    where = p.where("partition")
    names = [n for n in partition.split(",") if n]
    unknown = [n for n in names if n not in p.site.partitions]
    if unknown:
        raise SpecError(
            f"{where}: --partition={partition}: this site maps no partition {unknown[0]!r} "
            "(gpupool sbatch --site FILE, partitions:); leave it out to use the whole pool",
            field="partition",
        )
    models = {p.site.partitions[n].strip() for n in names}
    if "" in models or len(models) > 1:
        return model  # any card (or several kinds): the job's own type decides
    (only,) = models
    if model is not None and _model(only, where) != model:
        raise SpecError(f"{where}: --partition={partition} has {only} cards, not {model}")
    return _model(only, where)


def _constrained(p: _Plan, constraint: str, parts: list[str], gpus: int) -> list[str]:
    """``--constraint=a100`` (a GPU model or family); ``a|b`` alternatives of models."""
    where = p.where("constraint")
    options = [c for c in re.split(r"[|]", constraint) if c]
    if not gpus or any(not c.replace("-", "").replace("_", "").isalnum() for c in options):
        raise SpecError(
            f"{where}: --constraint={constraint}: gpupool reads a constraint as GPU models "
            "(a100, v100|a100) of a job that asks for GPUs",
            field="constraint",
        )
    models = "|".join(_model(c, where) or c for c in options)
    head = parts[0]
    if ":" in head.removeprefix("gpu="):
        raise SpecError(f"{where}: --constraint and a GPU type in --gres: one model, please")
    return [f"gpu={models}:{gpus}", *parts[1:]]


def _scalars(p: _Plan, job: SbatchJob) -> None:
    """Name, time, array, outputs, dependency, directory, hold, account, qos, export."""
    if p.get("time") is not None:
        job.time_s = parse_time(p.get("time") or "")
    job.name = p.get("job-name")
    if p.get("array") is not None:
        parse_array(p.get("array") or "")
        job.array = p.get("array")
    for name in ("output", "error"):
        text = p.get(name)
        if text is not None and re.search(r"%[^jAaxuN%]", text):
            raise SpecError(
                f"{p.where(name)}: --{name}={text}: only %j %A %a %x %u %N are expanded",
                field=name,
            )
        if text is not None:
            try:
                check_output_path(text, name)
            except SpecError as exc:
                raise SpecError(f"{p.where(name)}: {exc}", field=name) from None
        setattr(job, name, text)
    dep = p.get("dependency")
    if dep is not None:
        if "singleton" in dep:
            raise SpecError(
                f"{p.where('dependency')}: --dependency=singleton is not supported (one job "
                "of a name at a time): use afterok:ID",
                field="dependency",
            )
        job.dependency = [{"type": d.type, "job": d.job} for d in parse_dependency(dep)]
    job.chdir = p.get("chdir")
    job.hold = "hold" in p.seen
    job.wait = "wait" in p.seen
    account, qos = p.get("account"), p.get("qos")
    if account is not None:
        job.tenant = p.site.accounts.get(account, account)
    if qos is not None:
        job.priority_class = p.site.qos.get(qos, qos)
    job.partition = p.get("partition")
    export = p.get("export")
    if export is not None:
        job.export = export
    _signal(p, job)


def _signal(p: _Plan, job: SbatchJob) -> None:
    """``--signal``: the job saves on that signal — sent when it is stopped early (then
    SIGKILL after the server's checkpoint grace) and ``@time`` before its time limit."""
    text = p.get("signal")
    if text is None:
        return
    try:
        job.checkpoint = parse_sbatch_signal(text)
    except SpecError as exc:
        raise SpecError(f"{p.where('signal')}: {exc}", field="signal") from None
    before = int(str(job.checkpoint["before_limit_s"]))
    if job.time_s is not None and before < job.time_s:
        return
    job.checkpoint["before_limit_s"] = None
    if "@" not in text:
        return  # Slurm's implicit 60 s: nothing asked of a job without a longer time limit
    if job.time_s is None:
        job.warnings.append(
            f"{p.where('signal')}: --signal=...@{before} has no effect without --time (no "
            "time limit to signal before); the signal is still sent when it is stopped early"
        )
        return
    raise SpecError(
        f"{p.where('signal')}: --signal={text}: @{before} is not before the {job.time_s}-s "
        "time limit",
        field="signal",
    )
