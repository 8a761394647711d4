"""What the CLI's Slurm-shaped options do: which states ``-t`` names, which jobs ``-j``
names, and the lines ``queue -o "%.18i ..."`` / ``-O``, ``acct --format=JobID,State`` and
``job show --slurm`` print, from the API's jobs (their fields: ``slurm_jobs``; the format
strings: ``slurm_format``)."""

from typing import Any

from gpupool.cli import slurm_format as fmt
from gpupool.cli import slurm_jobs as sj
from gpupool.cli.array_refs import Ref, task_refs
from gpupool.cli.output import visible
from gpupool.client import ApiClient, ClientError
from gpupool.client.paging import all_items
from gpupool.model import SpecError
from gpupool.scheduler.reasons import Wait

# Slurm's state names (long and compact, any case) and gpupool's own, for the live states
LIVE_WORDS = {
    "pd": ("pending",), "pending": ("pending",),
    "cf": ("admitted",), "configuring": ("admitted",), "admitted": ("admitted",),
    "r": ("admitted", "running"), "running": ("admitted", "running"),
}  # fmt: skip


def live_states(text: str | None, option: str, own: str) -> tuple[str, ...] | None:
    """The gpupool states ``-t/--state`` names (``PD``, ``pending``, ``RUNNING,PD``...; R and
    running include admitted jobs, still starting: Slurm's CONFIGURING); None: not given.
    Ended states are refused naming the option (these commands see live jobs); ``own``:
    gpupool's words for them, as the error says them."""
    if text is None:
        return None
    words = [w.strip() for w in text.split(",") if w.strip()]
    out: list[str] = []
    for word in words:
        states = LIVE_WORDS.get(word.lower())
        if states is None:
            raise SpecError(
                f"{option}: {word!r} is not {own} (nor Slurm's PENDING/PD, CONFIGURING/CF, "
                "RUNNING/R; ended jobs: gpupool acct)",
                field="state",
            )
        out += [s for s in states if s not in out]
    if not out:
        raise SpecError(f"{option}: name a state", field="state")
    return tuple(out)


def job_refs(text: str | None) -> list[Ref] | None:
    """``-j/--jobs``: a comma list of ids and array tasks (``24``, ``24_3``, ``24_[1-3]``)."""
    if text is None:
        return None
    refs: list[Ref] = []
    for word in split_outside_brackets(text):
        refs += task_refs(word, "--jobs")
    return refs


def split_outside_brackets(text: str) -> list[str]:
    """``1,2_[1,3]`` -> ``1``, ``2_[1,3]``."""
    out, depth, word = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(word)
            word = ""
        else:
            word += ch
    return [w.strip() for w in [*out, word] if w.strip()]


def named_jobs(api: ApiClient, refs: list[Ref]) -> list[dict[str, Any]]:
    """The jobs ``refs`` name, in their order: an array's id names each of its tasks; a
    job the server does not have is an error naming it (as ``sacct -j``/``squeue -j``
    print nothing for it, but a typo should not pass silently)."""
    out: dict[int, dict[str, Any]] = {}
    for job_id, index in refs:
        if index is None:
            job = _job(api, job_id)
            if job.get("array_job") == job["id"]:
                for task in all_items(api, "/api/v1/jobs", array=job_id):
                    out.setdefault(task["id"], task)
            else:
                out.setdefault(job["id"], job)
            continue
        tasks = [t for t in all_items(api, "/api/v1/jobs", array=job_id)
                 if t["array_index"] == index]  # fmt: skip
        if not tasks:
            raise SpecError(f"--jobs: {job_id}_{index}: no such array task", field="jobs")
        out.setdefault(tasks[0]["id"], tasks[0])
    return list(out.values())


def _job(api: ApiClient, job_id: int) -> dict[str, Any]:
    try:
        return dict(api.get(f"/api/v1/jobs/{job_id}"))
    except ClientError as exc:
        if exc.status not in (404, 422):  # 422: an id above any the server could have
            raise
        raise SpecError(f"--jobs: no job {job_id} (that you may see)", field="jobs") from None


def dependency_states(api: ApiClient, jobs: list[dict[str, Any]]) -> dict[int, list[str]]:
    """The states of the jobs (an array's: of every task) that the dependencies of the jobs
    the gates hold name, as the server's gates read them (a job gone: no states, met)."""
    out: dict[int, list[str]] = {}
    for j in jobs:
        if j["state"] != "pending" or j.get("wait_code") != Wait.GATED:
            continue
        for d in j.get("dependency") or []:
            if d["type"] == "singleton" or d["job"] in out:
                continue
            try:
                dep = api.get(f"/api/v1/jobs/{d['job']}")
            except ClientError as exc:
                if exc.status != 404:
                    raise
                out[d["job"]] = []
                continue
            tasks = [dep]
            if dep.get("array_job") == dep["id"]:
                tasks = all_items(api, "/api/v1/jobs", array=dep["id"])
            out[d["job"]] = [t["state"] for t in tasks]
    return out


def squeue_lines(
    jobs: list[dict[str, Any]],
    percent: str | None,
    names: str | None,
    header: bool,
    states: sj.States | None = None,
) -> list[str]:
    """``queue -o "%.18i %.9P %j"`` (``percent``) or ``-O "JobID:.19,Name:20"`` (``names``);
    ``states``: those ``dependency_states`` gives, for reasons."""
    columns = sj.squeue_columns(states=states)
    if names is not None:
        prefix, fields = "", fmt.parse_long(names, sj.SQUEUE_NAMES, "-O/--Format")
    else:
        prefix, fields = fmt.parse_percent(percent or sj.SQUEUE_DEFAULT, columns, "--format")
    return fmt.render(jobs, prefix, fields, columns, header=header)


def is_sacct(spec: str | None, own: tuple[str, ...]) -> bool:
    """Whether ``acct --format`` is sacct's (``JobID,State%20``) rather than gpupool's own
    columns (``id,state,card_hours``): gpupool's when every name is exactly one of its
    columns, sacct's when every name is an sacct field gpupool prints (any case, a prefix, a
    ``%`` width). A name that is neither is left to the kind the others are, to be refused
    there naming it; names of both kinds together are refused."""
    if spec is None:
        return False
    names = [n.partition("%")[0].strip() for n in spec.split(",") if n.strip()]
    fields = sj.sacct_fields()

    def theirs(name: str) -> bool:
        return bool(name) and any(f.name.lower().startswith(name.lower()) for f in fields)

    if all(n in own for n in names):
        return False
    if all(theirs(n) for n in names):
        return True
    known = [n for n in names if n in own or theirs(n)]
    if known and all(n in own for n in known):
        return False  # pick_columns names the unknown one
    if known and all(theirs(n) for n in known):
        return True  # parse_sacct names the unknown one
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SpecError(
            f"--format: unknown column {unknown[0]!r} (gpupool's: {', '.join(own)}; or "
            f"sacct's fields: {', '.join(f.name for f in fields)})",
            field="format",
        )
    mine = next(n for n in names if n in own and not theirs(n))
    other = next(n for n in names if theirs(n) and n not in own)
    raise SpecError(
        f"--format: {mine!r} is one of gpupool's columns and {other!r} an sacct field: use "
        "gpupool's (id,state,card_hours) or sacct's (JobID,State,Elapsed)",
        field="format",
    )


def sacct_lines(
    jobs: list[dict[str, Any]],
    spec: str,
    header: bool,
    parsable: str,
    delimiter: str,
    states: sj.States | None = None,
) -> list[str]:
    fields = fmt.parse_sacct(spec, sj.sacct_fields(states=states))
    return fmt.render_sacct(jobs, fields, header, parsable, delimiter)


def show_job_text(job: dict[str, Any], oneliner: bool, states: sj.States | None = None) -> str:
    """``scontrol show job``'s text: its first line's pairs, then each further line's
    indented by three spaces (``-o``: all on one line)."""
    lines = [" ".join(visible(p) for p in pairs) for pairs in sj.show_job(job, states=states)]
    return " ".join(lines) if oneliner else "\n   ".join(lines) + "\n"
