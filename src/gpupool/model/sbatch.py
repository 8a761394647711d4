"""A batch script's sbatch options as a gpupool job, with Slurm's meaning: ``-N`` nodes are
distinct nodes (a gang, one worker a node; as many as ``-w`` names without it), GPUs per node
from ``--gres=gpu[:type]:N``, ``--gpus[-per-node|-per-task]`` or ``-G``, tasks as Slurm
resolves ``--ntasks`` and ``--ntasks-per-node``, CPUs from tasks × CPUs per task (or per
GPU), memory in Slurm's units (a bare number is MiB; K, M, G, T are powers of 1,024) per node
or per CPU or GPU (``--mem=0``: all of a node's), ``--exclusive`` (whole nodes), ``--time``,
``--array`` with ``%N``, ``--job-name``, ``--output``/``--error`` (absolute or relative, with
sbatch's filename patterns), ``--dependency`` (``singleton`` too), ``--chdir``, ``--hold``,
``--begin``, ``-w/--nodelist`` and ``-x/--exclude``, ``--account`` → tenant, ``--qos`` →
priority class, ``--partition`` and ``--constraint`` through the site's tables or the card
models. Every option is checked before anything is refused, and the refusal names all that
gpupool cannot honour, the most fundamental first (``sbatch_plan``); what cannot change where
or how the job runs is accepted with a warning naming it. Pure (``now`` for ``--begin``)."""

import re
import time
from dataclasses import dataclass, field

from gpupool.model import sbatch_resources as res
from gpupool.model.batch import (
    check_output_path,
    check_pattern,
    parse_array,
    parse_dependency,
    parse_time,
)
from gpupool.model.checkpoint import parse_sbatch_signal
from gpupool.model.errors import SpecError
from gpupool.model.sbatch_options import NO_EFFECT, REFUSED, Option
from gpupool.model.sbatch_plan import (
    FILES,
    PLACEMENT,
    RESOURCES,
    SITE,
    Plan,
    Refusal,
    Site,
    rank_of,
)
from gpupool.model.sbatch_resources import memory_mib
from gpupool.model.slurm_time import parse_begin

__all__ = ["Refusal", "SbatchJob", "Site", "memory_mib", "translate"]
_model = res.model_of


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
    exclusive: bool = False  # whole nodes (--exclusive): quotas and bills count all of each
    nodelist: list[str] | None = None  # -w: it holds each of these nodes
    exclude: list[str] | None = None  # -x: never these
    begin_at: float | None = None  # --begin: not before then


def translate(
    options: list[Option],
    site: Site | None = None,
    refusals: list[Refusal] | None = None,
    now: float | None = None,
) -> SbatchJob:
    """The gpupool job the options describe, or a ``SpecError`` naming everything gpupool
    cannot honour in them (and ``refusals`` found reading the script), the most fundamental
    first."""
    p = Plan(options, site or Site())
    p.refusals += refusals or []
    warnings: list[str] = []
    for name, opt in p.seen.items():
        if name in REFUSED:
            why = REFUSED[name] or "gpupool has no such thing"
            p.refuse(rank_of(name), f"{opt.where}: --{name} is not supported: {why}", name)
        if name in NO_EFFECT:
            said = f"={opt.value}" if name == "hint" and opt.value else ""
            warnings.append(f"{opt.where}: --{name}{said} has no effect here"
                            + (f" ({NO_EFFECT[name]})" if NO_EFFECT[name] else ""))  # fmt: skip
    nodelist = p.attempt(PLACEMENT, lambda: res.node_names(p, "nodelist"), None)
    exclude = p.attempt(PLACEMENT, lambda: res.node_names(p, "exclude"), None)
    named = len(nodelist or ())
    asked = p.attempt(RESOURCES, lambda: res.nodes_asked(p, named), None)
    shape = p.attempt(
        RESOURCES, lambda: res.layout(p, asked, named), res.Layout(asked or max(named, 1), 1)
    )
    nodes, tasks = shape.nodes, shape.tasks_per_node
    warnings += shape.warnings
    no_gpus: tuple[str | None, int] = (None, 0)
    model, gpus = p.attempt(RESOURCES, lambda: res.gpus(p, nodes, tasks), no_gpus)
    cpt = p.attempt(RESOURCES, lambda: res.positive(p, "cpus-per-task"), None) or 1
    cpus = tasks * cpt
    if p.get("cpus-per-gpu") is not None:
        per_gpu = p.attempt(RESOURCES, lambda: res.positive(p, "cpus-per-gpu"), None)
        cpus = max(cpus, (per_gpu or 1) * gpus)
    default: tuple[int | None, bool] = (None, False)
    mem, mem_all = p.attempt(RESOURCES, lambda: res.memory(p, cpus, gpus), default)
    whole = p.attempt(RESOURCES, lambda: res.exclusive(p), False)
    parts = [f"gpu={model}:{gpus}" if model else f"gpu={gpus}"] if gpus else []
    parts.append(f"cpu={cpus}")
    if mem is not None or mem_all:
        parts.append("mem=all" if mem_all else f"mem={mem}MiB")
    if whole:
        parts.append("node=whole")
    partition = p.get("partition")
    if partition is not None:
        model = p.attempt(SITE, lambda: _partition(p, partition, model), model)
        if gpus and model:
            parts[0] = f"gpu={model}:{gpus}"
    constraint = p.get("constraint")
    if constraint is not None:
        parts = p.attempt(SITE, lambda: _constrained(p, constraint, parts, gpus), parts)
    job = SbatchJob(request=",".join(parts), nodes=nodes, tasks_per_node=tasks,
                    cpus_per_task=cpt, gpus_per_node=gpus, warnings=warnings,
                    exclusive=whole, nodelist=nodelist, exclude=exclude)  # fmt: skip
    _scalars(p, job, time.time() if now is None else now)
    p.raise_refusals()
    job.env = {
        "SLURM_NTASKS": str(tasks * nodes), "SLURM_NTASKS_PER_NODE": str(tasks),
        "SLURM_CPUS_PER_TASK": str(cpt), "SLURM_NNODES": str(nodes),
        "SLURM_JOB_NUM_NODES": str(nodes),
        **({"SLURM_GPUS_PER_NODE": str(gpus), "SLURM_GPUS_ON_NODE": str(gpus)} if gpus else {}),
        **({"SLURM_JOB_PARTITION": partition} if partition else {}),
    }  # fmt: skip
    return job


def _partition(p: Plan, partition: str, model: str | None) -> str | None:
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


def _constrained(p: Plan, constraint: str, parts: list[str], gpus: int) -> list[str]:
    """``--constraint=a100`` (a GPU model or family); ``a|b`` alternatives of models."""
    where = p.where("constraint")
    options = [c for c in re.split(r"[|]", constraint) if c]
    if not gpus or any(not c.replace("-", "").replace("_", "").isalnum() for c in options):
        raise SpecError(
            f"{where}: --constraint={constraint}: gpupool reads a constraint as GPU models "
            "(a100, v100|a100) of a job that asks for GPUs",
            field="constraint",
        )
    try:
        models = "|".join(_model(c, where) or c for c in options)
    except SpecError:
        raise SpecError(
            f"{where}: --constraint={constraint}: gpupool reads a constraint as GPU models "
            "(a100, v100|a100); this names none it knows",
            field="constraint",
        ) from None
    head = parts[0]
    if ":" in head.removeprefix("gpu="):
        raise SpecError(f"{where}: --constraint and a GPU type in --gres: one model, please")
    return [f"gpu={models}:{gpus}", *parts[1:]]


def _scalars(p: Plan, job: SbatchJob, now: float) -> None:
    """Name, time, array, outputs, dependency, directory, hold, begin, account, qos, export."""
    if p.get("time") is not None:
        job.time_s = p.attempt(PLACEMENT, lambda: _time(p, p.get("time") or ""), None)
    job.name = p.get("job-name")
    if p.get("array") is not None:
        p.attempt(PLACEMENT, lambda: parse_array(p.get("array") or ""), None)
        job.array = p.get("array")
    for name in ("output", "error"):
        text = p.get(name)
        if text is not None:
            try:
                _path(p, name, text)
            except SpecError as exc:
                p.refuse(FILES, str(exc), name)
        setattr(job, name, text)
    dep = p.get("dependency")
    if dep is not None:
        job.dependency = p.attempt(PLACEMENT, lambda: _dependency(p, dep), [])
    job.chdir = p.get("chdir")
    job.hold = "hold" in p.seen
    job.wait = "wait" in p.seen
    begin = p.get("begin")
    if begin is not None:
        job.begin_at = p.attempt(PLACEMENT, lambda: _begin(p, begin, now), None)
    account, qos = p.get("account"), p.get("qos")
    if account is not None:
        job.tenant = p.site.accounts.get(account, account)
    if qos is not None:
        job.priority_class = p.site.qos.get(qos, qos)
    job.partition = p.get("partition")
    export = p.get("export")
    if export is not None:
        job.export = export
    p.attempt(PLACEMENT, lambda: _signal(p, job), None)


def _time(p: Plan, text: str) -> int | None:
    """sbatch's ``--time`` as Slurm reads it: no field range check; 0, -1, UNLIMITED and
    INFINITE are no time limit."""
    if text.strip().upper() in ("0", "-1", "UNLIMITED", "INFINITE"):
        return None
    try:
        return parse_time(text, strict=False)
    except SpecError as exc:
        raise SpecError(f"{p.where('time')}: {exc}", field="time") from None


def _path(p: Plan, name: str, text: str) -> None:
    try:
        check_pattern(check_output_path(text, name), name)
    except SpecError as exc:
        raise SpecError(f"{p.where(name)}: {exc}", field=name) from None


def _dependency(p: Plan, text: str) -> list[dict[str, object]]:
    """afterok/afterany/afternotok:ID..., and ``singleton``; ``?`` (any of them) refused."""
    where = p.where("dependency")
    if "?" in text:
        raise SpecError(
            f"{where}: --dependency={text}: '?' (any one condition) is not supported: every "
            "condition must hold here (separate them with ,)",
            field="dependency",
        )
    out: list[dict[str, object]] = []
    rest = [part for part in text.split(",") if part.strip()]
    if any(part.strip() == "singleton" for part in rest):
        out.append({"type": "singleton"})
        rest = [part for part in rest if part.strip() != "singleton"]
    if rest:
        try:
            out += [{"type": d.type, "job": d.job} for d in parse_dependency(",".join(rest))]
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}", field="dependency") from None
    return out


def _begin(p: Plan, text: str, now: float) -> float:
    try:
        return parse_begin(text, now)
    except SpecError as exc:
        raise SpecError(f"{p.where('begin')}: {exc}", field="begin") from None


def _signal(p: Plan, job: SbatchJob) -> None:
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
