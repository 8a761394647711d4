"""Following jobs to their end (``job submit --wait``, ``job wait``): state changes on
stderr, logs saved to the job's ``--output`` pattern, and the exit status a shell expects."""

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from gpupool.agent.job_output import NOT_WRITTEN
from gpupool.cli.output import users_zone
from gpupool.client import ApiClient, ClientError
from gpupool.client.paging import all_items
from gpupool.model import SpecError
from gpupool.model.batch import check_output_path, deliverable, expand_output

ENDED = frozenset({"succeeded", "failed", "cancelled"})
NODE_ONLY = (
    "{path}: its node's to write, as the job's own user (your gpupool saves only paths "
    "inside the directory you submitted from); its reason says if it could not"
)
TIMED_OUT = 124  # as timeout(1)


def exit_status(job: dict[str, Any]) -> int:
    """0 for success; the job's own exit code when it failed with one (a signal: 128 + its
    number, as a shell says); 1 for anything else that is not success."""
    if job["state"] == "succeeded":
        return 0
    code = job.get("exit_code")
    if isinstance(code, int) and code != 0:
        return 128 - code if code < 0 else min(code, 255)
    return 1


def tasks_of(api: ApiClient, job: dict[str, Any]) -> list[dict[str, Any]]:
    """A job now, or every task of the array it names."""
    if job.get("array_job") == job["id"]:
        return sorted(all_items(api, "/api/v1/jobs", array=job["id"]), key=lambda t: t["id"])
    return [api.get(f"/api/v1/jobs/{job['id']}")]


def follow(api: ApiClient, jobs: list[dict[str, Any]], timeout: float = 0) -> list[dict[str, Any]]:
    """Poll until every job (and every task of an array) has ended, printing each state
    change on stderr. ``timeout`` > 0 gives up after that many seconds (exit 124)."""
    deadline = time.monotonic() + timeout if timeout > 0 else None
    seen: dict[int, str] = {}
    delay = 0.2
    while True:
        now = [t for job in jobs for t in tasks_of(api, job)]
        for t in now:
            if seen.get(t["id"]) != t["state"]:
                seen[t["id"]] = t["state"]
                said = users_zone(t["reason"] or "")
                typer.echo(f"job {t['id']} {t['state']}: {said}", err=True)
        if all(t["state"] in ENDED for t in now):
            return now
        if deadline is not None and time.monotonic() >= deadline:
            live = [str(t["id"]) for t in now if t["state"] not in ENDED]
            typer.echo(f"gave up after {timeout:g} s; still live: {' '.join(live)}", err=True)
            raise typer.Exit(TIMED_OUT)
        time.sleep(delay)
        delay = min(2.0, delay * 1.5)


def log_chunks(api: ApiClient, job_id: int) -> Iterator[dict[str, Any]]:
    """Every log chunk the job's agents uploaded, oldest first."""
    after = 0
    while True:
        chunks = api.get(f"/api/v1/jobs/{job_id}/logs", after=after, limit=1000)["chunks"]
        yield from chunks
        if len(chunks) < 1000:
            return
        after = chunks[-1]["id"]


def output_path(job: dict[str, Any], pattern: str | None = None) -> str:
    """The job's ``--output`` (or ``pattern``) with its patterns expanded (``%N``: no node
    here)."""
    return expand_output(
        pattern or job["output"],
        job["id"],
        job["array_job"],
        job["array_index"],
        job.get("name") or "",
        job.get("submitted_by") or "",
    )


def output_files(job: dict[str, Any]) -> list[tuple[str, frozenset[str]]]:
    """(path, the streams it takes) of the job's ``--output`` / ``--error``: stderr joins
    the output unless ``--error`` names a file of its own (sbatch)."""
    out = output_path(job) if job.get("output") else None
    err = output_path(job, job["error"]) if job.get("error") else None
    if out and err and err != out:
        return [(out, frozenset({"stdout"})), (err, frozenset({"stderr"}))]
    if out:
        return [(out, frozenset({"stdout", "stderr"}))]
    return [(err, frozenset({"stderr"}))] if err else []


def node_only(job: dict[str, Any]) -> list[str]:
    """The job's output files that only its node writes (absolute, or leading out of the
    submit directory): the submitter's gpupool never saves those."""
    return [path for path, _ in output_files(job) if not deliverable(path)]


def written_by_node(job: dict[str, Any], here: Path | None = None) -> bool:
    """Whether the node already wrote the job's output files in ``here`` (the directory is
    shared with the node): each exists and was written since the job started."""
    folder = here or Path.cwd()
    files = output_files(job)
    try:
        since = (job.get("started_at") or 0) - 2
        return bool(files) and all(
            (folder / path).is_file() and (folder / path).stat().st_mtime >= since
            for path, _ in files
        )
    except (OSError, KeyError, TypeError):
        return False


def save_log(api: ApiClient, job: dict[str, Any], here: Path | None = None) -> list[Path]:
    """Write the job's log to its ``--output`` pattern — its stderr to ``--error`` when that
    names a file of its own — inside ``here`` (the current directory by default; where the
    node could not: the job ran where this directory is not): the paths are checked again
    here (a job stored before the server checked them), their folders must resolve inside
    ``here``, and each file is written aside and renamed into place, so a symlink there is
    replaced, never followed. A path outside ``here`` (absolute, ``..``) is its node's alone
    (``node_only``): not saved here. The node's note why it could not write them stays out (written
    here, it is not true of them; it stays in gpupool job logs)."""
    folder = (here or Path.cwd()).resolve()
    files = [(path, streams) for path, streams in output_files(job) if deliverable(path)]
    targets: list[tuple[Path, frozenset[str]]] = []
    for pattern, streams in files:
        try:
            targets.append((folder / check_output_path(pattern), streams))
        except SpecError as exc:
            raise ClientError(str(exc)) from None
    written: list[tuple[Path, Any, str]] = []
    try:
        for path, _ in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.parent.resolve().is_relative_to(folder):
                raise ClientError(f"output: {path} leads out of {folder}")
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            os.fchmod(fd, 0o644)
            written.append((path, os.fdopen(fd, "w"), tmp))
        for chunk in log_chunks(api, job["id"]):
            stream, text = chunk.get("stream") or "stdout", chunk["text"]
            if stream == "stderr" and NOT_WRITTEN in text:
                lines = text.splitlines(keepends=True)
                text = "".join(x for x in lines if not x.startswith(NOT_WRITTEN))
            for (_, streams), (_, f, _) in zip(targets, written, strict=True):
                if stream in streams:
                    f.write(text)
        for path, f, tmp in written:
            f.close()
            os.replace(tmp, path)
    except OSError as exc:
        raise ClientError(f"output: cannot write in {folder}: {exc.strerror or exc}") from None
    finally:
        for _, f, tmp in written:
            f.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return [Path(pattern) for pattern, _ in files]  # as the job named them, under ``here``
