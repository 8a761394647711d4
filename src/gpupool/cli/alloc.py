"""``gpupool alloc`` (Slurm's salloc): hold devices for a while without a command, e.g. for
an interactive session on the node. The grant lasts until its time limit or ``gpupool job
cancel``; it is metered like any job."""

import json
import time
from typing import Any

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.follow import ENDED
from gpupool.cli.jobs import (
    CPU_OPT,
    GPU_MEM_OPT,
    GPU_OPT,
    GPU_SHARE_OPT,
    MEM_OPT,
    MIG_OPT,
    REQUEST_OPT,
    RESOURCE_FLAGS,
    TENANT_OPT,
    _body,
)
from gpupool.cli.output import users_zone, zoned
from gpupool.cli.sessions import started
from gpupool.cli.views import where
from gpupool.client import ApiClient
from gpupool.model import SpecError


@client_command
def alloc(
    time_limit: str = typer.Option(
        ..., "--time", "-t", help="How long to hold them: MM, HH:MM:SS, D-HH:MM:SS or 2h, 90m"
    ),
    tenant: str = TENANT_OPT,
    gpu: str = GPU_OPT,
    gpu_mem: str = GPU_MEM_OPT,
    gpu_share: str = GPU_SHARE_OPT,
    mig: str = MIG_OPT,
    cpu: str = CPU_OPT,
    mem: str = MEM_OPT,
    request: str = REQUEST_OPT,
    name: str = typer.Option("alloc", help="A name to recognise it by"),
    priority_class: str = typer.Option(None, help="Priority class [default: dev-test]"),
    wait: float = typer.Option(
        300, help="Seconds to wait for the devices (0: submit and return at once)"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Hold devices interactively (salloc): gpupool alloc --gpu 2 --time 2:00:00. Prints
    where they are once granted; release them early with gpupool job cancel ID."""
    given: dict[str, Any] = {k: None for k in (*RESOURCE_FLAGS, "gang", "array", "dependency")}
    given.update(
        tenant=tenant, gpu=gpu, gpu_mem=gpu_mem, gpu_share=gpu_share, mig=mig, cpu=cpu,
        mem=mem, request=request, name=name, kind="dev", time=time_limit, hold=None,
        output=None, priority_class=priority_class or "dev-test",
    )  # fmt: skip
    body = _body(given, [], None, None)
    body.pop("command", None)
    body["allocation"] = True
    with ApiClient.from_env() as api:
        job = api.post("/api/v1/jobs", body)
        job = started(api, job, wait)
    if as_json:
        typer.echo(json.dumps(job, indent=2))
        return
    if job["state"] in ENDED:
        raise SpecError(f"job {job['id']} {job['state']}: {job['reason']}")
    if job["state"] != "running":
        typer.echo(f"job {job['id']} {job['state']}: {users_zone(job['reason'] or '')}")
        return
    until = (job["started_at"] or time.time()) + job["max_runtime_s"]
    typer.echo(
        f"job {job['id']} holds {where(job)} until {zoned(until)}; "
        f"a shell there: gpupool shell {job['id']}; "
        f"release it with: gpupool job cancel {job['id']}"
    )
