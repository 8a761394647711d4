"""A job's ``--output`` / ``--error`` files (sbatch), written on its node when it ends.

The agent hands what the workload printed (its capture files, opened by the agent) to
``/bin/sh`` run as the job's own user — never root — which enters the job's directory (its
--chdir, else its submit directory) and writes the files the patterns name, relative to it.
A path the job chose is thus opened only with the job's own rights, as sbatch's step daemon
does for Slurm. A directory the user cannot enter (not on this node, not its own) means the
job ran in its work folder, and nothing is written there: the log says so.
"""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpupool.model.batch import check_output_path, expand_output
from gpupool.model.protocol import OrderOut

# $1 the job's directory, $2 the file, $3 new or add; stdin: what to write
WRITER = """
cd -- "$1" 2>/dev/null || {
  echo "the job's directory $1 is not on this node or not its user's" >&2; exit 3; }
mkdir -p -- "$(dirname -- "$2")" || exit 3
if [ "$3" = new ]; then cat > "$2"; else cat >> "$2"; fi
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
    if not directory:
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
        )
        return check_output_path(path)

    return OutputPlan(directory, expand(order.output), expand(order.error), uid, gid)


def write_outputs(plan: OutputPlan, folder: Path, timeout: float = 60) -> str:
    """Write the capture files in ``folder`` as ``plan`` says; returns "" or why not."""
    for path, stream, mode in plan.writes():
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
                    timeout=timeout,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{path}: cannot write it: {exc}"
        if done.returncode != 0:
            return f"{path}: " + (done.stderr.strip()[-300:] or f"exit {done.returncode}")
    return ""


def write_or_say_why(fields: dict, folder: Path) -> None:
    """Write an ended job's --output / --error (``OutputPlan``'s ``fields``) from its capture
    files in ``folder``; why not goes into its stderr capture, so its log says so."""
    try:
        why = write_outputs(OutputPlan(**fields), folder)
    except OSError as exc:
        why = str(exc)
    if why:
        with (folder / "stderr").open("a") as err:
            err.write(f"{NOT_WRITTEN}{why}\n")
