"""How an ended workload is reported to the server: state, exit code and reason, read from
what its shim left in its folder (exit status, fencing and start-error notes) and from its
cgroup (whose OOM killer, when it was killed)."""

from pathlib import Path

from gpupool.agent import cgroups
from gpupool.agent import processes as proc
from gpupool.agent.state import Record


def outcome(rec: Record, folder: Path, node: str) -> tuple[str, int | None, str]:
    """(state, exit code, reason) of the ended workload ``rec`` whose folder is ``folder``."""
    code = proc.exit_code(folder)
    fenced = proc.note(folder, proc.FENCED)
    if rec.shutdown:
        return "lost", code, f"stopped when the agent of {node} shut down"
    if fenced:
        return "lost", code, fenced
    if rec.stop_reason:
        return "failed", code, rec.stop_reason
    cannot = proc.note(folder, proc.START_ERROR)
    if cannot:
        return "failed", code, cannot
    if code is None:
        return "failed", None, "workload vanished without an exit status"
    cause = cgroups.oom_cause(rec.cgroups) if code == -9 else None
    grant = f"its {rec.mem_mib} MiB grant" if rec.mem_mib else "its limit"
    if cause == "limit":
        return "failed", code, f"host memory: used more than {grant} (killed by the OOM killer)"
    if cause == "node":
        return "failed", code, (f"host memory: killed by the OOM killer when the node ran "
                                f"short of memory, within {grant}")  # fmt: skip
    state = "succeeded" if code == 0 else "failed"
    return state, code, f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
