"""What a submission needs beyond one row: a command (or an explicit allocation), its
dependencies checked (same tenant, existing jobs) and an array expanded into one job per index
(sbatch --array)."""

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.model import SpecError
from gpupool.model.batch import ArraySpec, parse_array
from gpupool.model.checkpoint import Checkpoint
from gpupool.server.auth import Principal
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import JobRow
from gpupool.server.errors import ApiError
from gpupool.server.schemas import JobIn
from gpupool.server.settings import Settings

JOB_INSERT = JobRow.__table__.insert()


def held_command(body: JobIn) -> list[str]:
    """The command a job runs. A job without one is refused (it would only fail on its node)
    unless it is an allocation (salloc): then a ``sleep`` of its time limit holds the devices,
    a real process, so the agent's limits, fencing and metering apply as to any job. A job
    with an image may leave the command to the image's entrypoint."""
    if body.interactive == "shell" and not body.allocation:
        raise ApiError(422, "interactive: a shell session is an allocation", "interactive")
    if body.interactive == "notebook":
        if body.allocation or body.image or not body.command:
            raise ApiError(422, "interactive: a notebook runs its web app as its command (no "
                           "allocation, no image)", "interactive")  # fmt: skip
        if body.array is not None or body.gang_size != 1:
            raise ApiError(422, "interactive: a notebook is not an array or a gang", "interactive")
    if body.allocation:
        if body.command or body.image:
            raise ApiError(422, "command: an allocation runs no command or image", "command")
        if body.max_runtime_s is None:
            raise ApiError(422, "max_runtime_s: an allocation needs a time limit", "max_runtime_s")
        if body.array is not None or body.gang_size != 1:
            raise ApiError(422, "allocation: not with an array or a gang", "allocation")
        return ["sleep", str(body.max_runtime_s)]
    if not body.command and body.image is None:
        raise ApiError(
            422,
            "command: required (what should the job run?); to hold devices interactively "
            "submit an allocation (gpupool alloc)",
            "command",
        )
    return list(body.command)


def checkpoint_of(body: JobIn, settings: Settings) -> dict[str, Any] | None:
    """The job's checkpoint with its grace resolved (the server's default, at most its
    maximum); ApiError 422 naming the field that cannot be honoured."""
    c = body.checkpoint
    if c is None:
        return None
    grace = settings.checkpoint_grace_s if c.grace_s is None else c.grace_s
    if grace > settings.checkpoint_grace_max_s:
        raise ApiError(
            422,
            f"checkpoint.grace_s: {grace} s is over this server's checkpoint_grace_max_s "
            f"({settings.checkpoint_grace_max_s} s): a vacate is to take seconds",
            "checkpoint.grace_s",
        )
    before = c.before_limit_s
    if before is not None and (body.max_runtime_s is None or before >= body.max_runtime_s):
        raise ApiError(
            422,
            "checkpoint.before_limit_s: needs a max_runtime_s longer than it (no time limit "
            "to signal before)",
            "checkpoint.before_limit_s",
        )
    return Checkpoint(c.signal, grace, c.shell_only, before).as_json()


def check_node_names(body: JobIn, pool: frozenset[str] | None) -> None:
    """sbatch -w/--nodelist and -x/--exclude name nodes of this pool (refused naming those
    that do not exist, as Slurm's "Invalid node name specified"); a job holds every node it
    names, so no more than its workers, and none it excludes."""
    for field in ("nodelist", "exclude"):
        names = getattr(body, field) or []
        unknown = sorted({n for n in names if pool is not None and n not in pool})
        if unknown:
            raise ApiError(422, f"{field}: no node {', '.join(unknown)} in this pool", field)
    named, excluded = set(body.nodelist or ()), set(body.exclude or ())
    if len(named) > body.gang_size:
        raise ApiError(
            422,
            f"nodelist: names {len(named)} nodes for {body.gang_size} worker(s) (a job holds "
            "every node it names)",
            "nodelist",
        )
    if named & excluded:
        both = ", ".join(sorted(named & excluded))
        raise ApiError(422, f"exclude: {both} also in nodelist", "exclude")
    if pool is not None and pool <= excluded:
        raise ApiError(422, "exclude: every node of this pool", "exclude")


def array_spec(text: str | None) -> ArraySpec | None:
    if text is None:
        return None
    try:
        return parse_array(text)
    except SpecError as exc:
        raise ApiError(422, str(exc), "array") from None


def check_dependencies(db: Database, who: Principal, tenant: str, jobs: list[int]) -> None:
    """Every job depended on exists, is visible to the caller and belongs to ``tenant``:
    one tenant's job never waits on (and so never learns the outcome of) another's."""
    if not jobs:
        return
    with db.read() as s:
        found = dict(s.execute(select(JobRow.id, JobRow.tenant).where(JobRow.id.in_(jobs))).all())
    for job in jobs:
        owner = found.get(job)
        if owner is None or not who.sees(owner):
            raise ApiError(422, f"dependency: no job {job}", "dependency")
        if owner != tenant:
            raise ApiError(
                422,
                f"dependency: job {job} belongs to tenant {owner!r}, not {tenant!r}; a job "
                "may only depend on jobs of its own tenant",
                "dependency",
            )


def array_env(env: dict[str, Any], array_job: int, index: int, spec: ArraySpec) -> dict[str, Any]:
    """A task's environment: Slurm's SLURM_ARRAY_* variables under our prefix."""
    return {
        **env,
        "GPUPOOL_ARRAY_JOB_ID": str(array_job),
        "GPUPOOL_ARRAY_TASK_ID": str(index),
        "GPUPOOL_ARRAY_TASK_COUNT": str(len(spec.indices)),
        "GPUPOOL_ARRAY_TASK_MIN": str(spec.indices[0]),
        "GPUPOOL_ARRAY_TASK_MAX": str(spec.indices[-1]),
    }


def add_array_tasks(
    session: Session, first_id: int, fields: dict[str, Any], spec: ArraySpec
) -> list[int]:
    """The first task is inserted already (``first_id``, its id names the array): mark it and
    insert the others; returns every task's id in index order."""
    env = fields["env"]
    first = array_env(env, first_id, spec.indices[0], spec)
    session.execute(
        update(JobRow.__table__)
        .where(JobRow.__table__.c.id == first_id)
        .values(array_job=first_id, env=first)
    )
    fields.update(array_job=first_id, env=first)
    rest = [
        {
            **fields,
            "idempotency_key": None,
            "array_index": index,
            "env": array_env(env, first_id, index, spec),
        }
        for index in spec.indices[1:]
    ]
    ids = [first_id]
    if rest:
        ids += [
            row[0]
            for row in session.execute(
                JOB_INSERT.returning(JobRow.__table__.c.id, sort_by_parameter_order=True), rest
            ).all()
        ]
    return ids
