"""A job says it saved a checkpoint by touching ``$GPUPOOL_CHECKPOINT_FILE`` (a file in its
own work folder); its agent reads the file's time each round and passes a newer one on, so a
preemption takes the job that would lose least work (``scheduler/actions/victims``).

The file is the job's, the folder the agent's making: the agent opens the folder without
following a link and reads the name in it without following one either, so a job can point
the agent at nothing but its own file's time."""

import contextlib
import os

from gpupool.agent.state import Record

NAME = ".gpupool-checkpoint"


def env(workdir: str) -> dict[str, str]:
    return {"GPUPOOL_CHECKPOINT_FILE": os.path.join(workdir, NAME)}


def stamp(workdir: str) -> float | None:
    """When the job last touched its checkpoint file (None: never, or no folder)."""
    if not workdir:
        return None
    try:
        fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with contextlib.suppress(OSError):
            return os.stat(NAME, dir_fd=fd, follow_symlinks=False).st_mtime
        return None
    finally:
        os.close(fd)


def fresh(records: dict[int, Record]) -> list[tuple[Record, float]]:
    """Running workloads whose checkpoint file is newer than the one last passed on."""
    out = []
    for rec in records.values():
        if rec.released or rec.stop_sent_at is not None:
            continue
        at = stamp(rec.workdir)
        if at is not None and at > (rec.checkpointed_at or 0.0):
            out.append((rec, at))
    return out
