"""Job commands as sbatch, scancel and scontrol users know them: submit (a command or a
script with ``#GPUPOOL`` directives; arrays, dependencies, holds, ``--wait``), list, show,
cancel, hold, release, requeue, wait and logs."""

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from gpupool.cli.array_refs import (
    cancel,
    cancelled_line,
    is_array,
    is_head,
    matching,
    named,
    task_refs,
)
from gpupool.cli.client import JSON_OPT, _ago, client_command, whoami
from gpupool.cli.follow import (
    NODE_ONLY,
    exit_status,
    follow,
    log_chunks,
    node_only,
    output_files,
    save_log,
    written_by_node,
)
from gpupool.cli.output import (
    FORMAT_HELP,
    SafeTable,
    emit,
    pick_columns,
    show,
    users_zone,
    visible,
)
from gpupool.client import ApiClient
from gpupool.client.paging import all_items
from gpupool.model import SpecError, parse_request
from gpupool.model.batch import Script, parse_array, parse_dependency, parse_time
from gpupool.model.checkpoint import signal_name

job_app = typer.Typer(help="Submit, list, inspect, control and cancel jobs.")
LIVE = ("pending", "admitted", "running")
RESOURCE_FLAGS = ("gpu", "gpu_mem", "gpu_share", "mig", "cpu", "mem")
# what to ask for, shared by job submit and alloc
TENANT_OPT = typer.Option(None, help="Tenant (default: your token's)")
GPU_OPT = typer.Option(None, help="gpu=... e.g. 2, A100-80G:2")
GPU_MEM_OPT = typer.Option(None, help="GPU memory per device, e.g. 20GiB")
GPU_SHARE_OPT = typer.Option(None, help="Compute share of one card, e.g. 0.5")
MIG_OPT = typer.Option(None, help="A MIG profile, e.g. 1g.10gb")
CPU_OPT = typer.Option(None, help="CPU cores, e.g. 4")
MEM_OPT = typer.Option(None, help="Memory, e.g. 32GiB")
REQUEST_OPT = typer.Option(None, help="A whole request string instead of the flags above")


@job_app.command("submit")
@client_command
def job_submit(
    command: list[str] = typer.Argument(
        None, help="The command to run, after --; or a script with #GPUPOOL directive lines"
    ),
    tenant: str = TENANT_OPT,
    gpu: str = GPU_OPT,
    gpu_mem: str = GPU_MEM_OPT,
    gpu_share: str = GPU_SHARE_OPT,
    mig: str = MIG_OPT,
    cpu: str = CPU_OPT,
    mem: str = MEM_OPT,
    request: str = REQUEST_OPT,
    name: str = typer.Option(None, help="A name to recognise the job by"),
    kind: str = typer.Option(None, help="training, inference, dev or batch [default: batch]"),
    priority_class: str = typer.Option(
        None,
        help="Priority class (online-inference, training, dev-test, or one an admin added) "
        "[default: by --kind: "
        "online-inference for inference, dev-test for dev, else training]",
    ),
    gang: int = typer.Option(None, help="Workers that must start together [default: 1]"),
    time_limit: str = typer.Option(
        None, "--time", "-t", help="Run time limit: MM, HH:MM:SS, D-HH:MM:SS (as sbatch) or 2h, 90m"
    ),
    max_runtime: int = typer.Option(None, help="Maximum run time in seconds (or --time)"),
    array: str = typer.Option(
        None, "--array", "-a", help="A job per index: 0-99, 1,3,5, 0-15:4; %N: N at once"
    ),
    dependency: str = typer.Option(
        None, "--dependency", "-d", help="afterok:ID[:ID], afterany:ID, afternotok:ID (a,b: all)"
    ),
    hold: bool = typer.Option(False, "--hold", "-H", help="Keep it pending until released"),
    output: str = typer.Option(
        None,
        "--output",
        "-o",
        help="Its node writes its output here, in its working directory: %j %A %a %x %u %N",
    ),
    error: str = typer.Option(
        None, "--error", "-e", help="Its stderr here (default: with the output)"
    ),
    chdir: str = typer.Option(
        None,
        "--chdir",
        "-D",
        help="Run in this directory on the node [default: this one when the node has it, "
        "else a work folder of its own]",
    ),
    wait: bool = typer.Option(
        False, "--wait", "-W", help="Follow it to its end; exit with its exit code"
    ),
    key: str = typer.Option(None, help="Idempotency key: resubmitting it returns the same job"),
    checkpoint_signal: str = typer.Option(
        None,
        help="It saves its work on this signal (USR1...): stopped early, it gets it instead "
        "of SIGTERM, and SIGKILL after --checkpoint-grace",
    ),
    checkpoint_grace: int = typer.Option(
        None, min=1, help="Seconds it needs to save [default: the server's, 5]"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Submit a job: gpupool job submit --tenant algo --gpu 2 -- python train.py, or a script
    (as sbatch): gpupool job submit train.sh, whose leading comment lines may say
    #GPUPOOL --gpu A100-80G:2 --cpu 8 --time 4:00:00 --array 0-9%2 (flags given here win)."""
    given: dict[str, Any] = {
        "tenant": tenant, "gpu": gpu, "gpu_mem": gpu_mem, "gpu_share": gpu_share, "mig": mig,
        "cpu": cpu, "mem": mem, "request": request, "name": name, "kind": kind,
        "priority_class": priority_class, "gang": gang, "time": time_limit, "array": array,
        "dependency": dependency, "hold": hold or None, "output": output, "error": error,
        "chdir": chdir,
    }  # fmt: skip
    argv = list(command or [])
    script = _script(argv)
    if script is not None:
        for option, value in script.options.items():
            field = option[2:].replace("-", "_")
            if given[field] is None:
                given[field] = value
        argv = script.command
    body = _body(given, argv, max_runtime, key)
    if checkpoint_grace is not None and checkpoint_signal is None:
        raise SpecError("--checkpoint-grace: give --checkpoint-signal too", field="checkpoint")
    if checkpoint_signal is not None:
        body["checkpoint"] = {"signal": signal_name(checkpoint_signal, "--checkpoint-signal")}
        if checkpoint_grace is not None:
            body["checkpoint"]["grace_s"] = checkpoint_grace
    with ApiClient.from_env() as api:
        job = api.post("/api/v1/jobs", body)
        if as_json and not wait:
            typer.echo(json.dumps(job, indent=2))
            _deliver_later(job, say=False)
            return
        if job.get("array_size"):
            limit = f", at most {job['array_limit']} at once" if job["array_limit"] else ""
            said = f"array {job['id']}: {job['array_size']} tasks {job['state']}{limit}"
        else:
            what = job.get("shape") or job["request"]
            said = f"job {job['id']} {job['state']}: {what} for {job['tenant']}"
        typer.echo(said, err=wait)
        if wait:
            raise typer.Exit(_wait(api, [job], as_json))
    _deliver_later(job, say=True)


def _deliver_later(job: dict[str, Any], say: bool) -> None:
    """Outputs reach this directory however its node runs the job (``cli.deliver``)."""
    if output_files(job):
        from gpupool.cli.deliver import spool_submitted

        said = spool_submitted(job)
        if say:
            typer.echo(said, err=True)


def _body(given: dict[str, Any], argv: list[str], max_runtime: int | None, key: str | None):
    """The API body from flags and directives, checked here first (clear errors, no call)."""
    parts = [f"{k}={given[k]}" for k in RESOURCE_FLAGS if given[k] is not None]
    if given["request"] and parts:
        raise SpecError("give either --request or the resource flags, not both")
    spec = given["request"] or ",".join(parts) or "cpu=1"
    parse_request(spec)
    if max_runtime is None and given["time"] is not None:
        max_runtime = parse_time(str(given["time"]))
    try:
        gang_size = int(given["gang"] or 1)
    except ValueError:
        raise SpecError(f"gang: {given['gang']!r} is not a number", field="gang") from None
    if given["array"] is not None:
        parse_array(str(given["array"]))
    deps = parse_dependency(str(given["dependency"])) if given["dependency"] else []
    body = {
        "request": spec,
        "tenant": given["tenant"],
        "name": given["name"] or "",
        "kind": given["kind"] or "batch",
        "priority_class": given["priority_class"],  # None: the server's default for the kind
        "gang_size": gang_size,
        "max_runtime_s": max_runtime,
        "command": argv,
        "idempotency_key": key,
        "array": given["array"],
        "dependency": [{"type": d.type, "job": d.job} for d in deps],
        "hold": bool(given["hold"]),
        "output": given.get("output"),
        "error": given.get("error"),
        "chdir": _absolute(given.get("chdir")),
        "submit_dir": _here() if argv else None,
    }
    return {k: v for k, v in body.items() if v is not None}


SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".py", ".sbatch", ".slurm", ".job")


def _names_a_script(word: str) -> bool:
    """A lone argument that reads as a script file here (a relative path or a script's
    suffix), not a program to find on the node (``nvidia-smi``, ``/opt/app/run``)."""
    return not word.startswith("/") and ("/" in word or word.endswith(SCRIPT_SUFFIXES))


def _here() -> str | None:
    """The submit directory (None when the current one was deleted)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _absolute(path: str | None) -> str | None:
    """``--chdir`` relative to where the command runs, as sbatch reads it."""
    if path is None:
        return None
    return os.path.normpath(os.path.join(_here() or "/", os.path.expanduser(path)))


def _script(argv: list[str]) -> Script | None:
    """A job script (sbatch-style) when the only argument is a file with a #! line or
    #GPUPOOL directives; None for a plain command."""
    from gpupool.model.batch import parse_script

    if len(argv) != 1:
        return None
    path = Path(argv[0])
    if not path.is_file():
        if "--" not in sys.argv and _names_a_script(argv[0]):
            raise SpecError(
                f"{argv[0]}: no such file (a script to submit must exist here; a program "
                f"that only the node has goes after --: -- {argv[0]})",
                field="script",
            )
        return None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read the script: {exc}") from None
    if not (text.startswith("#!") or "#GPUPOOL" in text):
        return None
    if any(line.strip().startswith("#SBATCH") for line in text.splitlines()):
        raise SpecError(  # read as sbatch reads them, never skipped without a word
            f"{path}: its #SBATCH lines are sbatch's: submit it with gpupool sbatch {path} "
            "(job submit reads #GPUPOOL lines)",
            field="script",
        )
    return parse_script(text, path.name)


def _wait(api: ApiClient, jobs: list[dict[str, Any]], as_json: bool, timeout: float = 0) -> int:
    """Follow jobs (an array: all its tasks) to their end, save logs to their ``--output``,
    and return the exit status a shell should see (the highest of them, as sbatch --wait)."""
    ended = follow(api, jobs, timeout)
    me = api.get("/api/v1/status")["user"] if any(output_files(j) for j in ended) else None
    for job in ended:
        if not output_files(job):
            continue
        if written_by_node(job):
            wrote = ", ".join(visible(path) for path, _ in output_files(job))
            typer.echo(f"job {job['id']}: its node wrote {wrote}", err=True)
            continue
        if job["submitted_by"] != me:  # someone else's path choice is not written here
            typer.echo(
                f"job {job['id']}: log not saved (its --output was chosen by "
                f"{visible(job['submitted_by'])}; read it with gpupool job logs {job['id']})",
                err=True,
            )
            continue
        saved = save_log(api, job)
        if saved:
            paths = ", ".join(visible(str(p)) for p in saved)
            typer.echo(f"job {job['id']}: log saved to {paths}", err=True)
        if node_only(job):
            theirs = ", ".join(visible(path) for path in node_only(job))
            typer.echo(f"job {job['id']}: {NODE_ONLY.format(path=theirs)}", err=True)
    if as_json:
        typer.echo(json.dumps(ended, indent=2))
    return max(exit_status(j) for j in ended)


@job_app.command("wait")
@client_command
def job_wait(
    job_ids: list[int] = typer.Argument(..., help="Job ids (an array's id: all its tasks)"),
    timeout: float = typer.Option(0, help="Give up after this many seconds (exit 124)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Wait until the jobs end, printing their state changes; exit with their exit code
    (the highest; 1 for a job cancelled or failed without one)."""
    from gpupool.cli.deliver import unspool

    with ApiClient.from_env() as api:
        jobs = [api.get(f"/api/v1/jobs/{i}") for i in dict.fromkeys(job_ids)]
        unspool(api.server, [j["id"] for j in jobs])  # their outputs are saved here instead
        raise typer.Exit(_wait(api, jobs, as_json, timeout))


JOB_COLUMNS = ("id", "tenant", "user", "name", "request", "state", "age", "exit", "reason",
               "array", "index", "held", "kind", "class")  # fmt: skip
JOB_DEFAULT = ("id", "tenant", "user", "name", "state", "age", "reason")


def _job_cell(j: dict[str, Any], column: str) -> str:
    value = {
        "user": j["submitted_by"],
        "age": _ago(j["submit_time"]),
        "exit": j["exit_code"],
        "array": j["array_job"],
        "index": j["array_index"],
        "held": "yes" if j["held"] else "",
        "class": j["priority_class"],
        "request": j.get("shape") or j["request"],
        "reason": users_zone(j["reason"] or ""),
    }.get(column, j.get(column))
    return "-" if value is None else str(value)


@job_app.command("list")
@client_command
def job_list(
    state: str = typer.Option(None, help="Only jobs in this state"),
    tenant: str = typer.Option(None, help="Only this tenant's jobs"),
    user: str = typer.Option(None, help="Only jobs this user submitted"),
    me: bool = typer.Option(False, "--me", help="Only jobs you submitted"),
    name: str = typer.Option(None, help="Only jobs with this name"),
    array: int = typer.Option(None, help="Only the tasks of this array"),
    limit: int = typer.Option(50, help="How many"),
    fields: str = typer.Option(None, "--format", "-o", help=FORMAT_HELP + ", ".join(JOB_COLUMNS)),
    as_json: bool = JSON_OPT,
) -> None:
    """List jobs you may see, newest first."""
    columns = pick_columns(fields, JOB_COLUMNS, JOB_DEFAULT)
    with ApiClient.from_env() as api:
        user = whoami(api) if me else user
        page = api.get(
            "/api/v1/jobs", state=state, tenant=tenant, user=user, name=name, array=array,
            limit=limit,
        )  # fmt: skip
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    emit(
        page["items"],
        columns,
        cell=_job_cell,
        cut="reason",  # one line a job; job show ID says it whole
        caption=f"{len(page['items'])} of {page['total']} (job show ID: whole reasons)",
    )


def expected_start(e: dict[str, Any]) -> str:
    """A pending job's estimate in words: when (the user's zone), where, and from what."""
    if e.get("start") is None:
        return f"not within the plan ({e.get('basis') or 'nothing expected to end'})"
    when = datetime.fromtimestamp(e["start"]).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")
    nodes = ",".join(e.get("nodes") or []) or "-"
    return f"{when} on {nodes} ({e.get('basis') or 'room now'})"


@job_app.command("show")
@client_command
def job_show(
    job_id: int,
    slurm: bool = typer.Option(
        False, "--slurm", help="As scontrol show job prints it: Key=value pairs"
    ),
    oneliner: bool = typer.Option(
        False, "--oneliner", help="With --slurm: all pairs on one line (scontrol -o)"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """One job with its allocation and its state history (--slurm: scontrol show job's
    Key=value pairs, for scripts that read them)."""
    if oneliner and not slurm:
        raise SpecError("--oneliner: applies to --slurm", field="oneliner")
    if slurm and as_json:
        raise SpecError("--json: not with --slurm", field="slurm")
    with ApiClient.from_env() as api:
        job = api.get(f"/api/v1/jobs/{job_id}")
        if slurm:
            from gpupool.cli.slurm_cli import dependency_states, show_job_text

            typer.echo(show_job_text(job, oneliner, dependency_states(api, [job])))
            return
        job["events"] = api.get(f"/api/v1/jobs/{job_id}/events")
    t = SafeTable("field", "value", title=f"job {job['id']}", box=None, header_style="bold")
    for k in ("tenant", "submitted_by", "name", "request", "kind", "priority_class", "state"):
        t.add_row(k, str(job.get("shape") or job[k]) if k == "request" else str(job[k]))
    t.add_row("reason", users_zone(job["reason"] or ""))
    if job.get("checkpoint"):
        c = job["checkpoint"]
        t.add_row("checkpoint", f"saves on SIG{c['signal']} within {c['grace_s']} s")
    if job.get("interactive"):  # a session: how to reach it (docs/interactive.md)
        reach = f"gpupool shell {job['id']}"
        if job["interactive"] == "notebook":
            path = f"/api/v1/jobs/{job['id']}/notebook/"
            reach = f"{api.server}{path} (a browser: gpupool notebook --link {job['id']})"
        t.add_row(str(job["interactive"]), reach)
    if job.get("lost_gpu_s"):
        t.add_row("work lost", f"{job['lost_gpu_s'] / 3600:.2f} GPU-h to preemptions")
    if job.get("wait_code"):
        t.add_row("waits for", job["wait_code"])
    if job.get("estimate"):
        t.add_row("expected start", expected_start(job["estimate"]))
    if job["array_job"] is not None:
        t.add_row("array", f"{job['array_job']} index {job['array_index']}")
    for d in job["dependency"]:
        t.add_row("dependency", f"{d['type']}:{d['job']}")
    if job["allocation"]:
        for n in job["allocation"]["nodes"]:
            devs = ",".join(str(d["device"]) for d in n["devices"]) or "-"
            t.add_row("node", f"{n['node']} devices {devs}")
    for e in job["events"]:
        change = f"{e['from_state'] or 'submitted'} -> {e['to_state']}"
        t.add_row("event", f"{_ago(e['time'])} ago {change} {users_zone(e['reason'] or '')}")
    show(job, as_json, t)


def _select(
    api: ApiClient, ids: list[int], filters: dict[str, Any], states: tuple[str, ...]
) -> list[int]:
    """The ids given, or the jobs in ``states`` matching every filter (both: the given ids
    that match)."""
    state = filters.pop("state", None)
    if state is None and all(v is None for v in filters.values()):
        return list(dict.fromkeys(ids))
    matched: list[int] = []
    for s in (state,) if state else states:
        matched += [j["id"] for j in all_items(api, "/api/v1/jobs", state=s, **filters)]
    return [i for i in dict.fromkeys(ids) if i in set(matched)] if ids else sorted(matched)


@job_app.command("cancel")
@client_command
def job_cancel(
    job_ids: list[str] = typer.Argument(
        None,
        help="Job ids; an array's id cancels the whole array, ARRAY_TASK (24_3) one "
        "task, 24_[1-3,7] those tasks",
    ),
    tenant: str = typer.Option(None, "--tenant", "-A", help="Every live job of this tenant"),
    user: str = typer.Option(None, "--user", "-u", help="…submitted by this user"),
    me: bool = typer.Option(False, "--me", help="…submitted by you"),
    state: str = typer.Option(
        None,
        "--state",
        "-t",
        help="…in this state: pending, admitted or running (also "
        "scancel's PENDING/PD, CONFIGURING/CF, RUNNING/R: running and admitted)",
    ),
    name: str = typer.Option(None, "--name", "-n", help="…with this name"),
    array: int = typer.Option(None, help="…of this array (every task still live)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Cancel jobs (their devices are released at once), as scancel: by ids — an array's id
    cancels every task not yet ended, ARRAY_TASK (24_3) that task alone — or every live job
    that matches all the filters given."""
    from gpupool.cli.slurm_cli import live_states

    refs = [ref for i in job_ids or [] for ref in task_refs(i)]
    states = live_states(state, "--state", "one of pending, admitted, running")
    if not refs and not me and all(f is None for f in (tenant, user, state, name, array)):
        raise SpecError("give job ids or at least one of --tenant, --user, --me, --state, --name")
    replicas: list[dict[str, Any]] = []
    with ApiClient.from_env() as api:
        user = whoami(api) if me else user
        filters = {"tenant": tenant, "user": user, "name": name}
        if (
            states is None
            and all(f is None for f in filters.values())
            and (array is None or not refs)
        ):
            if array is not None:  # --array alone: the array, if it is one
                refs = [(array, None)] if is_array(api, array) else []
            done = [cancel(api, *named(api, ref)) for ref in dict.fromkeys(refs)]
        else:  # each job that matches, alone; a service's replicas are its autoscaler's
            chosen = matching(api, refs, {**filters, "array": array}, states or LIVE)
            replicas = [j for j in chosen if j.get("service")]
            chosen = [j for j in chosen if not j.get("service")]
            done = [cancel(api, j["id"], j["array_index"] if is_head(j) else None) for j in chosen]
    if as_json:
        typer.echo(json.dumps([answer for answer, _ in done], indent=2))
        return
    for answer, whole in done:
        typer.echo(cancelled_line(answer, whole))
    for line in replicas_left(replicas):
        typer.echo(line)
    if not done and not replicas:
        typer.echo("no job matched")


def replicas_left(replicas: list[dict[str, Any]]) -> list[str]:
    """What a cancel by filters said of the service replicas it left alone."""
    by_service: dict[str, list[int]] = {}
    for j in replicas:
        by_service.setdefault(j["service"], []).append(j["id"])
    return [
        f"left {len(ids)} service replica(s) alone: {', '.join(map(str, sorted(ids)))} of "
        f"service {visible(svc)} (its autoscaler's: gpupool service scale {visible(svc)} N, or "
        f"gpupool service delete {visible(svc)})"
        for svc, ids in sorted(by_service.items())
    ]


def _control(verb: str, ids: list[int], array: int | None, states: tuple[str, ...], **q: Any):
    """Apply ``verb`` (hold, release, requeue) to jobs by id or every live task of an array."""
    if not ids and array is None:
        raise SpecError("give job ids or --array ID")
    with ApiClient.from_env() as api:
        chosen = _select(api, ids, {"array": array}, states)
        for job_id in chosen:
            job = api.call("POST", f"/api/v1/jobs/{job_id}/{verb}", params=q or None)
            typer.echo(f"job {job['id']} {job['state']}: {users_zone(job['reason'] or '')}")
    if not chosen:
        typer.echo("no job matched")


@job_app.command("hold")
@client_command
def job_hold(
    job_ids: list[int] = typer.Argument(None, help="Pending job ids"),
    array: int = typer.Option(None, help="Every pending task of this array"),
) -> None:
    """Keep pending jobs from starting until released (scontrol hold)."""
    _control("hold", list(job_ids or []), array, ("pending",))


@job_app.command("release")
@client_command
def job_release(
    job_ids: list[int] = typer.Argument(None, help="Held job ids"),
    array: int = typer.Option(None, help="Every pending task of this array"),
) -> None:
    """Let held jobs be scheduled again (scontrol release)."""
    _control("release", list(job_ids or []), array, ("pending",))


@job_app.command("requeue")
@client_command
def job_requeue(
    job_ids: list[int] = typer.Argument(None, help="Running job ids"),
    array: int = typer.Option(None, help="Every running task of this array"),
    hold: bool = typer.Option(False, "--hold", help="Hold them once requeued (requeuehold)"),
) -> None:
    """Stop running jobs and queue them again; they restart from the top (scontrol
    requeue). Their devices are released and metered now."""
    q = {"hold": "true"} if hold else {}
    _control("requeue", list(job_ids or []), array, ("admitted", "running"), **q)


@job_app.command("logs")
@client_command
def job_logs(job_id: int) -> None:
    """Print a job's captured output."""
    with ApiClient.from_env() as api:
        for chunk in log_chunks(api, job_id):
            typer.echo(chunk["text"], nl=False)
