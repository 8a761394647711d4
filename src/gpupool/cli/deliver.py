"""Outputs delivered back to their submitter: what ``--wait`` does in the foreground, for
jobs submitted without it (``gpupool sbatch``, ``gpupool job submit --output``).

A job's node writes its ``--output`` / ``--error`` as the job's own user, in its submit
directory, when it can (a shared file system; Slurm's way). Where it cannot — under ``gpupool
up`` as root a job runs as ``gp-<team>``, which may not enter the submitter's folder — only
the submitter may write there, and the submitter's own process is the one that should: never
the root-run agent (a tenant's path in a root process's hands), never a file made writable
for the job's user (a 0700 home cannot be entered by it anyway). So the submitting command
spools the job (its server, credential and directory; one file, 0600, in the CLI's config
folder) and makes sure one **deliverer** runs for this user: a detached ``python -m
gpupool.cli.deliver`` that follows every spooled job to its end, saves the outputs its node
did not write — in the directory it was submitted from, as this user, by the same checks as
``--wait`` (``follow.save_log``) — and exits once the spool is empty. One runs at a time (a
lock in the spool), whatever the number of jobs; what it could not deliver is logged in
``deliver.log`` beside the spool, and ``gpupool job logs ID`` has every job's log anyway."""

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpupool.cli.follow import (
    ENDED,
    NODE_ONLY,
    node_only,
    output_files,
    save_log,
    tasks_of,
    written_by_node,
)
from gpupool.client import ApiClient, ClientError
from gpupool.client.profiles import config_dir
from gpupool.model.batch import deliverable

log = logging.getLogger("gpupool.deliver")
LOCK, LOG, PID = "deliver.lock", "deliver.log", "deliver.pid"
UNREACHABLE_S = 900.0  # a server away this long: its jobs are given up (said in the log)
GONE = (401, 403, 404)  # the job or the credential is gone: nothing will ever come


def spool() -> Path:
    return config_dir() / "outputs"


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _key(server: str, job_id: int) -> str:
    return hashlib.sha256(f"{server}\0{job_id}".encode()).hexdigest()[:16]


def unspool(server: str, job_ids: list[int]) -> None:
    """``gpupool job wait`` takes these jobs over: it saves their outputs itself."""
    for job_id in job_ids:
        (spool() / f"{_key(server, job_id)}.json").unlink(missing_ok=True)


def enqueue(server: str, token: str | None, ca: str | None, job_id: int, here: Path) -> Path:
    """Spool job ``job_id`` (an array's id: every task) of ``server`` for delivery into
    ``here``, and start the deliverer unless one runs."""
    folder = _private_dir(spool())
    key = _key(server, job_id)
    entry = {"server": server, "token": token, "ca": ca, "job": job_id,
             "dir": str(here), "since": time.time()}  # fmt: skip
    path = folder / f"{key}.json"
    tmp = folder / f".{key}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(entry, f)
    os.replace(tmp, path)
    start(folder)
    return path


def start(folder: Path) -> None:
    """A detached deliverer for ``folder`` (it exits at once if one runs already)."""
    with open(folder / LOG, "a") as errors:
        subprocess.Popen(
            [sys.executable, "-m", "gpupool.cli.deliver", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd="/",
            start_new_session=True,  # not the terminal's: closing it does not stop delivery
            close_fds=True,
        )


def deliver(entry: dict[str, Any], now: float) -> bool:
    """Deliver one spooled job if it has ended; True when its entry is done with."""
    here = Path(entry["dir"])
    with ApiClient(entry["server"], entry.get("token"), ca=entry.get("ca")) as api:
        try:
            tasks = tasks_of(api, api.get(f"/api/v1/jobs/{int(entry['job'])}"))
        except ClientError as exc:
            if exc.status == 0 or exc.status >= 500:  # away for now: asked again later
                away = entry.setdefault("away_since", now)
                if now - away <= UNREACHABLE_S:
                    return False
                exc = ClientError(f"{exc} for {now - away:.0f} s", exc.status)
            log.warning("job %s of %s: %s; not delivered", entry["job"], entry["server"], exc)
            return True
        entry.pop("away_since", None)
        if not all(t["state"] in ENDED for t in tasks):
            return False
        for task in tasks:
            if not output_files(task) or written_by_node(task, here):
                continue
            try:
                saved = save_log(api, task, here)
            except ClientError as exc:  # a folder gone, a disk full: said, not retried
                log.warning("job %s: %s; not delivered", task["id"], exc)
                continue
            log.info("job %s: saved %s", task["id"], ", ".join(str(here / p) for p in saved))
    return True


def spool_submitted(job: dict[str, Any]) -> str:
    """Spool ``job`` (just submitted from this directory by this command's credential) and
    say where its outputs will be."""
    from gpupool.client import load_credentials, profiles
    from gpupool.client.http import CA_ENV, read_ca, server_url

    server, token = load_credentials()
    server = server_url(server)
    ca_file = os.environ.get(CA_ENV)
    ca = read_ca(ca_file) if ca_file else profiles.ca_for(server)
    mine = [path for path, _ in output_files(job) if deliverable(path)]
    theirs = NODE_ONLY.format(path=", ".join(node_only(job))) if node_only(job) else ""
    if not mine:  # nothing this user's gpupool may save: no deliverer
        return theirs
    enqueue(server, token, ca, int(job["id"]), Path.cwd())
    files = ", ".join(mine)
    more = " (and its other tasks')" if job.get("array_size") else ""
    return (
        f"{files}{more} will be here when job {job['id']} ends: written by its node where "
        "it may write here, else saved by your gpupool (a background deliverer; gpupool job "
        f"wait {job['id']} saves it now)" + (f"; {theirs}" if theirs else "")
    )


def run(folder: Path) -> None:
    """Deliver until the spool is empty; one deliverer at a time (the lock)."""
    while True:
        with open(folder / LOCK, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another one delivers (it looks at the spool again before it exits)
            (folder / PID).write_text(f"{os.getpid()}\n")  # who delivers (tests stop it)
            _drain(folder)
            (folder / PID).unlink(missing_ok=True)
        # a job spooled while this one was leaving: its submitter's start met the lock held
        if not any(folder.glob("*.json")):
            return


def _drain(folder: Path) -> None:
    started, pause = time.monotonic(), 1.0
    state: dict[Path, dict[str, Any]] = {}
    while True:
        paths = sorted(folder.glob("*.json"))
        if not paths:
            return
        now = time.time()
        for path in paths:
            try:
                entry = state.get(path) or json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                log.warning("%s: %s; removed", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            if deliver(entry, now):
                path.unlink(missing_ok=True)
                state.pop(path, None)
            else:
                state[path] = entry
        # quick for short jobs, then every 15 s at most
        pause = 1.0 if time.monotonic() - started < 30 else min(15.0, pause * 1.5)
        time.sleep(pause)


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else spool()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s gpupool deliver[%(process)d]: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    with contextlib.suppress(KeyboardInterrupt):
        run(folder)


if __name__ == "__main__":
    main()
