"""The kernel's OOM killer and gpupool's own processes: the server and the agent (and each
workload's shim, which records how it ended) are the last the kernel picks when a node runs
out of memory; every workload is put back to the ordinary score, so it is never shielded by
the agent it was started from."""

from pathlib import Path

PROTECTED = -900  # systemd's own daemons use -900; -1000 would make the kernel never pick us
SCORE = Path("/proc/self/oom_score_adj")


def protect() -> bool:
    """Lower this process's OOM score (root only); whether it took."""
    try:
        SCORE.write_text(str(PROTECTED))
    except OSError:
        return False
    return True


def unprotect() -> None:
    """In a workload's first process, before it runs the job: the ordinary score again."""
    try:
        if int(SCORE.read_text()) < 0:
            SCORE.write_text("0")
    except (OSError, ValueError):
        pass
