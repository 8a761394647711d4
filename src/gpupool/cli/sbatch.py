"""``gpupool sbatch [OPTIONS] SCRIPT [ARGS...]``: a batch script submitted as sbatch submits
it — its ``#SBATCH`` lines, then the same options on the command line (they win), with
Slurm's meaning (``gpupool.model.sbatch``), or a refusal naming the option. Prints
``Submitted batch job N`` (``--parsable``: the id alone); warnings go to stderr."""

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from gpupool.cli.client import client_command
from gpupool.client import ApiClient, ClientError
from gpupool.model import SpecError
from gpupool.model.sbatch import Refusal, SbatchJob, Site, translate
from gpupool.model.sbatch_options import Option, read_words, script_options
from gpupool.model.sbatch_plan import SCRIPT

# variables of the submitting shell that belong to its host, its user there or gpupool's
# client: the node sets HOME, USER and TMPDIR for the job's own user and folder
NOT_EXPORTED = ("HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PROMPT_COMMAND",
                "DISPLAY", "LS_COLORS", "MAIL", "TERM", "TERMCAP", "COLORTERM", "HOME",
                "USER", "LOGNAME", "TMPDIR")  # fmt: skip
NOT_EXPORTED_PREFIXES = ("SSH_", "GPUPOOL_", "SLURM_", "XDG_", "DBUS_", "BASH_FUNC_")
HELP = """Submit a batch script as sbatch does:
gpupool sbatch [OPTIONS] train.sh [ARGS...]. Its #SBATCH lines and these OPTIONS
(the same names, which win) keep Slurm's meaning: --gres=gpu[:type]:N,
--gpus[-per-node|-per-task], -G, -N (distinct nodes), -n, --ntasks-per-node,
-c, --cpus-per-gpu, --mem[-per-cpu|-per-gpu] (MiB unless K/M/G/T; --mem=0: all
of a node's), --exclusive (whole nodes, counted whole by quotas and bills), -w
and -x (node lists), -b/--begin, -t, -a, -J, -o, -e (sbatch's %-patterns; an
absolute path is written by the node as the job's user), -d (also singleton),
-D, -H, -A (tenant), -q (priority class), -p and -C (site tables: --site FILE),
--export, --wrap, --wait, --parsable. Every directive is checked, and all that
gpupool cannot honour is refused at once, each named (hetjob too); mail, --hint
and the like are accepted with a warning. docs/slurm.md has the table."""


def load_site(path: str | None) -> Site:
    """The site's tables (YAML: partitions, qos, accounts); none: an empty one."""
    if path is None:
        return Site()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"--site {path}: {exc}") from None
    tables = {}
    for key in ("partitions", "qos", "accounts"):
        table = data.get(key) or {}
        if not isinstance(table, dict):
            raise SpecError(f"--site {path}: {key} must map names to names")
        tables[key] = {str(k): "" if v is None else str(v) for k, v in table.items()}
    return Site(**tables)


def exported(spec: str, environ: dict[str, str]) -> dict[str, str]:
    """sbatch's ``--export``: ALL (the default: the submitting shell's variables, less those
    of its host and of gpupool's client), NONE, or NAME[=value],... (ALL may lead the list)."""
    words = [w for w in spec.split(",") if w]
    out: dict[str, str] = {}
    if words and words[0] in ("ALL", "NONE"):
        head, words = words[0], words[1:]
    else:
        head = "NONE" if words else "ALL"
    if head == "ALL":
        out = {
            k: v
            for k, v in environ.items()
            if k not in NOT_EXPORTED and not k.startswith(NOT_EXPORTED_PREFIXES) and "\x00" not in v
        }
    for word in words:
        name, eq, value = word.partition("=")
        if eq:
            out[name] = value
        elif name in environ:
            out[name] = environ[name]
    return out


def _script(rest: list[str], wrap: str | None) -> tuple[str, str, list[str]]:
    """(text, name, arguments) of the batch script: a file, ``--wrap``'s command, or stdin."""
    if wrap is not None:
        if rest:
            raise SpecError(f"--wrap and a script {rest[0]!r}: one of them")
        return f"#!/bin/sh\n{wrap}\n", "wrap", []
    if not rest:
        return _not_empty(sys.stdin.read(), "the batch script on stdin"), "sbatch", []
    path = Path(rest[0])
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{rest[0]}: cannot read the batch script: {exc}") from None
    return _not_empty(text, rest[0]), path.name, rest[1:]


def _not_empty(text: str, what: str) -> str:
    """As sbatch: a script with nothing in it is refused, not run as a job doing nothing."""
    if not text:
        raise SpecError(f"{what}: Batch script is empty! (sbatch refuses it too)")
    if not text.strip():
        raise SpecError(f"{what}: Batch script contains only whitespace! (sbatch refuses it too)")
    return text


# the request fields an sbatch option is sent as, and that option: a refusal names it
SLURM_OPTIONS = {
    "max_runtime_s": "--time",
    "tenant": "--account",
    "name": "--job-name",
    "priority_class": "--qos",
    "gang_size": "--nodes",
    "array": "--array",
    "dependency": "--dependency",
    "output": "--output",
    "error": "--error",
    "chdir": "--chdir",
    "checkpoint.signal": "--signal",
    "checkpoint.grace_s": "--signal",
    "env": "--export",
    "nodelist": "--nodelist",
    "exclude": "--exclude",
    "begin_at": "--begin",
}


def body(job: SbatchJob, text: str, name: str, args: list[str], env: dict[str, str]):
    """The API body of the job the script describes."""
    interpreter = ["/bin/sh"]
    first = text.splitlines()[0] if text else ""
    if first.startswith("#!"):
        interpreter = shlex.split(first[2:].strip()) or interpreter
    here = os.getcwd()
    default_output = "slurm-%A_%a.out" if job.array else "slurm-%j.out"
    out: dict[str, Any] = {
        "request": job.request,
        "tenant": job.tenant,
        "name": (job.name or name)[:200],
        "kind": "batch",
        "priority_class": job.priority_class or "training",
        "gang_size": job.nodes,
        "one_per_node": job.nodes > 1,
        "max_runtime_s": job.time_s,
        "command": [*interpreter, "-c", text, name, *args],
        "env": {**env, **job.env},
        "array": job.array,
        "dependency": job.dependency,
        "hold": job.hold,
        "output": job.output or default_output,
        "error": job.error,
        "chdir": os.path.normpath(os.path.join(here, job.chdir)) if job.chdir else None,
        "submit_dir": here,
        "checkpoint": job.checkpoint,
        "nodelist": job.nodelist,
        "exclude": job.exclude,
        "begin_at": job.begin_at,
    }
    return {k: v for k, v in out.items() if v is not None}


def whole_nodes(out: dict[str, Any], job: SbatchJob) -> str:
    """What --exclusive means for this job's quota and bill, said at submission."""
    nodes = f"{job.nodes} whole nodes" if job.nodes > 1 else "a whole node"
    return (
        f"--exclusive: job {out['id']} gets {nodes}: every card and CPU of each, and nothing "
        f"else runs there meanwhile; {out['tenant']}'s quota and bill count all of them, not "
        "only the cards and CPUs asked"
    )


@client_command
def sbatch(ctx: typer.Context) -> None:
    words = list(ctx.args)
    if any(
        w in ("--help", "-h", "--usage")
        for w in words[: words.index("--") if "--" in words else None]
    ):
        typer.echo(HELP + "\n\n--site FILE: the site's tables (YAML: partitions, qos, accounts).")
        raise typer.Exit(0)
    site_path = None
    for i, word in enumerate(words):
        if word == "--site" and i + 1 < len(words):
            site_path = words[i + 1]
            del words[i : i + 2]
            break
        if word.startswith("--site="):
            site_path = word.split("=", 1)[1]
            del words[i]
            break
    refusals: list[Refusal] = []  # every problem found: one refusal names them all

    def refuse(text: str) -> None:
        refusals.append(Refusal(SCRIPT, text, "script"))

    options, rest = read_words(words, "the command line", refuse)
    wrap = next((o.value for o in options if o.name == "wrap"), None)
    text, name, args = _script(rest, wrap)
    merged: list[Option] = [*script_options(text, name, refuse), *options]
    job = translate([o for o in merged if o.name != "wrap"], load_site(site_path), refusals)
    env = exported(job.export, dict(os.environ))
    for warning in job.warnings:
        typer.echo(f"gpupool sbatch: warning: {warning}", err=True)
    parsable = any(o.name == "parsable" for o in merged)
    with ApiClient.from_env() as api:
        try:
            out = api.post("/api/v1/jobs", body(job, text, name, args, env))
        except ClientError as exc:
            exc.options = SLURM_OPTIONS  # said as the option a Slurm user wrote (issue 59)
            if exc.status == 422 and exc.field == "tenant":
                raise ClientError(
                    f"{exc}: give the account to run as with -A/--account TEAM (or "
                    "#SBATCH --account=TEAM in the script; --site FILE maps accounts to teams)",
                    422,
                ) from None
            raise
        typer.echo(str(out["id"]) if parsable else f"Submitted batch job {out['id']}")
        if job.exclusive and not parsable:
            typer.echo(f"gpupool sbatch: {whole_nodes(out, job)}", err=True)
        if job.wait:
            from gpupool.cli.jobs import _wait

            raise typer.Exit(_wait(api, [out], False))
    from gpupool.cli.deliver import spool_submitted

    said = spool_submitted(out)  # its outputs reach this directory however its node runs it
    if not parsable:
        typer.echo(f"gpupool sbatch: {said}", err=True)
