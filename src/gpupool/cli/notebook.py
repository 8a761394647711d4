"""``gpupool notebook``: a web app on a slice — JupyterLab by default, or any command that
serves HTTP on ``$GPUPOOL_NOTEBOOK_PORT`` under ``$GPUPOOL_NOTEBOOK_BASE_URL`` — run as an
interactive job in its sandbox and reached through the server (docs/interactive.md,
"Notebooks"). Prints a one-time login link for a browser; ``--link JOB`` prints a new one."""

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
from gpupool.client import ApiClient, ClientError
from gpupool.model import SpecError, notebook

APP_WAIT_S = 120.0  # for the app to answer once its job runs


def link(api: ApiClient, job_id: int) -> dict[str, Any]:
    """A new one-time login link of a running notebook, with the server's address."""
    made: dict[str, Any] = api.post(f"/api/v1/jobs/{job_id}/notebook-link")
    made["login_url"] = api.server + made["login_path"]
    made["url"] = api.server + made["notebook_path"]
    return made


def wait_for_app(api: ApiClient, job_id: int, wait: float) -> str | None:
    """Until the app answers through the server (None) or ``wait`` seconds pass (why not)."""
    deadline = time.monotonic() + wait
    why = "it did not answer"
    while time.monotonic() < deadline:
        try:
            resp = api.http.get(notebook.base_path(job_id), timeout=30)
        except Exception as exc:  # httpx's: the server's answer is what counts below
            why = str(exc)
        else:
            if resp.status_code not in (409, 502, 503, 504):  # 409: the job ended
                return None
            why = resp.text[:300]
        job = api.get(f"/api/v1/jobs/{job_id}")
        if job["state"] != "running":
            return f"job {job_id} {job['state']}: {job['reason']} (gpupool job logs {job_id})"
        time.sleep(1.0)
    return why


@client_command
def notebook_command(
    command: list[str] = typer.Argument(
        None, help="The web app, after -- [default: JupyterLab where the job runs]"
    ),
    time_limit: str = typer.Option(
        "4:00:00", "--time", "-t", help="How long to hold the slice: HH:MM:SS, 2h, 90m"
    ),
    tenant: str = TENANT_OPT,
    gpu: str = GPU_OPT,
    gpu_mem: str = GPU_MEM_OPT,
    gpu_share: str = GPU_SHARE_OPT,
    mig: str = MIG_OPT,
    cpu: str = CPU_OPT,
    mem: str = MEM_OPT,
    request: str = REQUEST_OPT,
    name: str = typer.Option("notebook", help="A name to recognise it by"),
    priority_class: str = typer.Option(None, help="Priority class [default: dev-test]"),
    wait: float = typer.Option(300, help="Seconds to wait for the devices"),
    link_for: int = typer.Option(
        None, "--link", metavar="JOB", help="Print a new login link of a running notebook"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """A notebook on a slice: gpupool notebook --gpu-share 25%. Runs the app in the
    job's sandbox and prints a one-time link for a browser (a minute or two to open)
    and the URL for tools with your token; the app listens on $GPUPOOL_NOTEBOOK_PORT
    (loopback) and serves under $GPUPOOL_NOTEBOOK_BASE_URL."""
    with ApiClient.from_env() as api:
        if link_for is not None:
            _print(link(api, link_for), as_json)
            return
        given: dict[str, Any] = {k: None for k in (*RESOURCE_FLAGS, "gang", "array", "dependency")}
        given.update(
            tenant=tenant, gpu=gpu, gpu_mem=gpu_mem, gpu_share=gpu_share, mig=mig, cpu=cpu,
            mem=mem, request=request, name=name, kind="dev", time=time_limit, hold=None,
            output=None, priority_class=priority_class or "dev-test",
        )  # fmt: skip
        body = _body(given, list(command or notebook.JUPYTER), None, None)
        body["interactive"] = notebook.KIND
        job = api.post("/api/v1/jobs", body)
        job = started(api, job, wait)
        if job["state"] in ENDED:  # its app ended before it was seen running: its log says why
            raise SpecError(
                f"job {job['id']} {job['state']}: {job['reason']} (gpupool job logs {job['id']})"
            )
        if job["state"] != "running":
            raise ClientError(f"job {job['id']} {job['state']}: {users_zone(job['reason'] or '')}"
                              f" (gpupool notebook --link {job['id']} once it runs)")  # fmt: skip
        typer.echo(f"job {job['id']} runs; waiting for its app to answer", err=True)
        why = wait_for_app(api, job["id"], APP_WAIT_S)
        if why is not None:
            raise ClientError(f"job {job['id']}'s app is not answering: {why} (it still holds "
                              f"its slice: gpupool job cancel {job['id']})")  # fmt: skip
        made = link(api, job["id"])
        made["until"] = (job["started_at"] or time.time()) + job["max_runtime_s"]
        _print(made, as_json)


def _print(made: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(made, indent=2))
        return
    job_id = made["job_id"]
    until = f" until {zoned(made['until'])}" if made.get("until") else ""
    typer.echo(
        f"notebook job {job_id}{until}\n"
        f"  open in a browser (once, within {int(made['expires_at'] - time.time())} s):\n"
        f"    {made['login_url']}\n"
        f"  with your token (Authorization: Bearer ...): {made['url']}\n"
        f"  a new link: gpupool notebook --link {job_id}; "
        f"stop it: gpupool job cancel {job_id}"
    )
