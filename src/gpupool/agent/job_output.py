"""A job's ``--output`` / ``--error`` files (sbatch), written on its node when it ends.

The agent hands what the workload printed (its capture files, opened by the agent) to
``/bin/sh`` run as the job's own user — never root — which enters the job's directory (its
--chdir, else its submit directory) and writes the files the patterns name, relative to it,
or at the absolute path a pattern names (shared storage: ``/scratch/...``). A path the job
chose is thus opened only with the job's own rights, as sbatch's step daemon does for Slurm,
and the file system's permissions decide. A directory the user cannot enter (not on this
node, not its own) means the job ran in its work folder, and nothing relative is written
there: the log says so. An agent that runs workloads as root (``--isolation none`` as root)
writes no path that leaves the job's directory: such a job does not start, saying why.
"""

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gpupool.model.batch import check_output_path, deliverable, expand_output
from gpupool.model.errors import SpecError
from gpupool.model.protocol import OrderOut

# $1 the job's directory, $2 the file, $3 new or add; stdin: what to write. The file is
# opened read-write first (which never waits, not even on a FIFO without a reader) and written
# only if that is a regular file — through the descriptor's own link, so it cannot be swapped
# for another kind in between. /dev/null (Slurm scripts' "discard it") takes nothing.
WRITER = """
[ "$2" = /dev/null ] && exit 0
case "$2" in
/*) cd / ;;
*) cd -- "$1" 2>/dev/null || {
  echo "the job's directory $1 is not on this node or not its user's" >&2; exit 3; } ;;
esac
mkdir -p -- "$(dirname -- "$2")" || exit 3
exec 3<>"$2" || exit 3
[ -f /proc/self/fd/3 ] || { echo "$2 is not a regular file" >&2; exit 4; }
if [ "$3" = new ]; then cat > /proc/self/fd/3; else cat >> /proc/self/fd/3; fi
"""
SHELL_PATH = "/usr/local/bin:/usr/bin:/bin"
NOT_WRITTEN = "gpupool: --output not written: "  # its stderr says so, with why


@dataclass(frozen=True)
class OutputPlan:
    directory: str  # the job's --chdir, else its submit directory
    output: str | None  # expanded, relative to it
    error: str | None
    uid: int | None
    gid: int | None

    def writes(self) -> list[tuple[str, str, str]]:
        """(file, stream, new|add) in order: stderr joins the output unless --error names
        a file of its own (sbatch)."""
        out: list[tuple[str, str, str]] = []
        if self.output:
            out.append((self.output, "stdout", "new"))
        err = self.error or self.output
        if err:
            out.append((err, "stderr", "add" if err == self.output else "new"))
        return out


def plan_for(order: OrderOut, node: str, uid: int | None, gid: int | None) -> OutputPlan | None:
    """What the end of ``order``'s workload writes, or None (no --output nor --error, an
    image job, or no directory to write in)."""
    if not (order.output or order.error) or order.image:
        return None
    directory = order.chdir or order.submit_dir
    absolute = [p for p in (order.output, order.error) if p and p.startswith("/")]
    if not directory and not absolute:
        return None

    def expand(pattern: str | None) -> str | None:
        if not pattern:
            return None
        path = expand_output(
            pattern,
            order.job_id,
            order.array_job,
            order.array_index,
            order.job_name or "",
            order.submitted_by or "",
            node,
            node_index(order, node),
        )
        if uid is None and os.geteuid() == 0 and not deliverable(path):
            raise SpecError(
                f"output: {path[:200]} leaves the job's directory, and this agent runs "
                "workloads as root (--isolation none): a path a job names is written only "
                "as the job's own user (run the agent with tenant-users)",
                field="output",
            )
        return check_output_path(path)

    return OutputPlan(directory or "/", expand(order.output), expand(order.error), uid, gid)


def node_index(order: OrderOut, node: str) -> int:
    """This node's place among the job's nodes (Slurm's ``%n``, ``SLURM_NODEID``)."""
    names = [n.node for n in order.nodes]
    return names.index(node) if node in names else 0


def write_outputs(plan: OutputPlan, folder: Path, timeout: float = 30) -> str:
    """Write the capture files in ``folder`` as ``plan`` says, all within ``timeout``
    seconds; returns "" or why not."""
    deadline = time.monotonic() + timeout
    for path, stream, mode in plan.writes():
        left = deadline - time.monotonic()
        if left <= 0:
            return f"{path}: not written within {timeout:.0f} s"
        try:
            with (folder / stream).open("rb") as source:
                done = subprocess.run(
                    ["/bin/sh", "-c", WRITER, "sh", plan.directory, path, mode],
                    stdin=source,
                    user=plan.uid,
                    group=plan.gid,
                    extra_groups=[] if plan.uid is not None else None,
                    cwd="/",
                    env={"PATH": SHELL_PATH, "LANG": "C.UTF-8"},
                    capture_output=True,
                    text=True,
                    timeout=left,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{path}: cannot write it: {exc}"
        if done.returncode != 0:
            return f"{path}: " + (done.stderr.strip()[-300:] or f"exit {done.returncode}")
    return ""
