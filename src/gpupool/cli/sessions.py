"""Interactive sessions from the command line (docs/interactive.md): ``srun`` (``--pty``
for a shell on a slice), ``shell``, ``exec``, ``attach`` into a session made with ``alloc``."""

import time
from typing import Any

import typer

from gpupool.cli.client import client_command
from gpupool.cli.follow import ENDED
from gpupool.cli.output import users_zone
from gpupool.cli.terminal_io import run as run_terminal
from gpupool.client import ApiClient, ClientError
from gpupool.model import SpecError
from gpupool.model.batch import parse_time
from gpupool.model.sbatch import translate
from gpupool.model.sbatch_options import read_words

SRUN_TIME = "1:00:00"  # an srun's allocation without --time


def started(api: ApiClient, job: dict[str, Any], wait: float) -> dict[str, Any]:
    """Say the job's state on stderr; then follow it until it runs or ends, at most ``wait``
    seconds (0: not at all) — past them an error that says it stays queued."""
    typer.echo(f"job {job['id']} {job['state']}: {users_zone(job['reason'] or '')}", err=True)
    deadline = time.monotonic() + wait
    while wait > 0 and job["state"] not in ("running", *ENDED):
        if time.monotonic() > deadline:
            raise ClientError(
                f"job {job['id']} still {job['state']} after {wait:g} s: {job['reason']} (it "
                f"stays queued; gpupool job cancel {job['id']} to give up)"
            )
        time.sleep(0.5)
        job = api.get(f"/api/v1/jobs/{job['id']}")
    return job


def wait_running(api: ApiClient, job: dict[str, Any], wait: float) -> dict[str, Any]:
    """Until the job runs (its session can be opened), saying so on stderr."""
    job = started(api, job, wait)
    if job["state"] != "running":
        raise SpecError(f"job {job['id']} {job['state']}: {job['reason']}")
    return job


def _cancel(api: ApiClient, job_id: int) -> None:
    try:
        api.post(f"/api/v1/jobs/{job_id}/cancel")
    except ClientError as exc:
        if exc.status != 409:  # ended already
            raise


SRUN_HELP = """Run a command on a slice (Slurm's srun):
gpupool srun --gres=gpu:1 --pty bash. Without --jobid it holds the devices
asked for (an interactive session, as gpupool alloc), runs the command there
and gives them back when it ends; with --jobid ID it runs in that session.
Options as sbatch reads them: --gres, -G/--gpus, -c/--cpus-per-task, --mem,
-t/--time (default 1:00:00), -J/--job-name, -A/--account, -q/--qos,
-p/--partition; --pty gives the command a terminal (this one, raw); the
command's exit code is gpupool's."""


@client_command
def srun(ctx: typer.Context) -> None:
    words = list(ctx.args)
    head = words[: words.index("--")] if "--" in words else words
    if any(w in ("--help", "-h", "--usage") for w in head[: _command_at(head)]):
        typer.echo(SRUN_HELP)
        raise typer.Exit(0)
    pty, job_id, words = _srun_own(words)
    options, command = read_words(words, "the command line")
    if not command and not pty:
        raise SpecError("srun: give the command to run (or --pty for a shell)", field="command")
    with ApiClient.from_env() as api:
        if job_id is not None:
            raise typer.Exit(run_terminal(api, job_id, command=command or None, pty=pty))
        job = translate(options)
        for warning in job.warnings:
            typer.echo(f"gpupool srun: warning: {warning}", err=True)
        body = {
            "request": job.request,
            "tenant": job.tenant,
            "name": job.name or "srun",
            "kind": "dev",
            "priority_class": job.priority_class,
            "max_runtime_s": job.time_s or parse_time(SRUN_TIME),
            "allocation": True,
            "interactive": "shell",
        }
        made = api.post("/api/v1/jobs", {k: v for k, v in body.items() if v is not None})
        try:
            wait_running(api, made, 600)
            code = run_terminal(api, made["id"], command=command or None, pty=pty)
        finally:
            _cancel(api, made["id"])  # srun's allocation lives as long as its step
    raise typer.Exit(code)


def _command_at(words: list[str]) -> int:
    for i, w in enumerate(words):
        if not w.startswith("-"):
            return i
    return len(words)


def _srun_own(words: list[str]) -> tuple[bool, int | None, list[str]]:
    """srun's own options (--pty, --jobid) out of the words, before the command."""
    pty, job_id, rest = False, None, []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--" or not word.startswith("-"):
            rest += words[i:]
            break
        if word == "--pty":
            pty = True
        elif word.startswith("--jobid"):
            value = word.partition("=")[2] if "=" in word else None
            if value is None and i + 1 < len(words):
                i += 1
                value = words[i]
            if value is None or not value.isdigit():
                raise SpecError(f"srun: --jobid {value!r}: a job id", field="jobid")
            job_id = int(value)
        else:
            rest.append(word)
        i += 1
    return pty, job_id, rest


@client_command
def shell(
    job_id: int = typer.Argument(..., help="An interactive session's job id (gpupool alloc)"),
) -> None:
    """A shell in a session's sandbox — its tenant's user, cgroup, network, folder and the
    slice's variables — as srun --jobid ID --pty bash. The link dropped? It reattaches."""
    with ApiClient.from_env() as api:
        raise typer.Exit(run_terminal(api, job_id, command=None, pty=True))


@client_command
def exec_command(
    job_id: int = typer.Argument(..., help="An interactive session's job id"),
    command: list[str] = typer.Argument(..., help="The command, after --"),
    tty: bool = typer.Option(False, "--tty", "-t", help="Give it a terminal (this one, raw)"),
) -> None:
    """Run a command in a session's sandbox: gpupool exec 12 -- nvidia-smi. Its stdout and
    stderr stay apart (one terminal with -t); its exit code is gpupool's."""
    with ApiClient.from_env() as api:
        raise typer.Exit(run_terminal(api, job_id, command=command, pty=tty, reattach=tty))


@client_command
def attach(
    job_id: int = typer.Argument(..., help="An interactive session's job id"),
    terminal: int = typer.Argument(None, help="Which terminal [default: the latest]"),
) -> None:
    """Attach to a terminal still running in a session (after a dropped link, or from
    elsewhere): what it printed meanwhile is shown (its last 64 KiB)."""
    with ApiClient.from_env() as api:
        raise typer.Exit(
            run_terminal(api, job_id, command=None, pty=True, attach=terminal or "last")
        )
