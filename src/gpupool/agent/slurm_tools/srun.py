#!/usr/bin/env python3
"""gpupool's ``srun`` inside a batch job: this node's tasks of the step, each with its
``SLURM_PROCID`` and ``SLURM_LOCALID`` (``gpupool.agent.slurm_env`` says why only this
node's). ``-l`` prefixes each line with the task's rank; the exit code is the worst task's."""

import os
import subprocess
import sys
import threading

VALUE = {
    "-n", "--ntasks", "-N", "--nodes", "--ntasks-per-node", "-c", "--cpus-per-task", "--gres",
    "--gpus", "--gpus-per-node", "--gpus-per-task", "--mem", "--export", "--cpu-bind", "--mpi",
    "-o", "--output", "-e", "--error", "-J", "--job-name", "-p", "--partition", "-t", "--time",
    "--distribution", "-m", "--mem-per-cpu", "--mem-per-gpu", "--cpus-per-gpu", "-A",
    "--account", "--qos", "-q", "-D", "--chdir", "-w", "--nodelist",
}  # fmt: skip
FLAG = {
    "-l", "--label", "-K", "--kill-on-bad-exit", "-u", "--unbuffered", "--overlap",
    "--exclusive", "--pty", "-v", "--verbose", "-Q", "--quiet",
}  # fmt: skip


def options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    args, opts = list(argv), {}
    while args and args[0].startswith("-"):
        word = args.pop(0)
        if word == "--":
            break
        name, eq, value = word.partition("=")
        if name in VALUE:
            opts[name] = value if eq else (args.pop(0) if args else "")
        elif name in FLAG:
            opts[name] = "1"
        elif not name.startswith("--") and name[:2] in VALUE:  # -n4
            opts[name[:2]] = name[2:]
        else:
            sys.exit(f"srun: {word}: not an option gpupool's srun knows (docs/slurm.md)")
    return opts, args


def main() -> None:
    opts, command = options(sys.argv[1:])
    if "-w" in opts or "--nodelist" in opts:
        sys.exit("srun: -w: gpupool's srun runs on the job's own nodes only")
    if not command:
        sys.exit("srun: no command")
    env = os.environ
    nodes, node_id = int(env.get("SLURM_NNODES", "1")), int(env.get("SLURM_NODEID", "0"))
    explicit = opts.get("-N") or opts.get("--nodes")
    use = min(int(explicit or nodes), nodes)
    per_node = opts.get("--ntasks-per-node")
    total = opts.get("-n") or opts.get("--ntasks")

    def count(i: int) -> int:
        """Tasks of the step on the job's i-th node."""
        if i >= use:
            return 0
        if per_node:
            return int(per_node)
        if total:
            return int(total) // use + (1 if i < int(total) % use else 0)
        return 1 if explicit else int(env.get("SLURM_NTASKS_PER_NODE", "1"))

    here, first = count(node_id), sum(count(i) for i in range(node_id))
    step = sum(count(i) for i in range(use))
    label = "-l" in opts or "--label" in opts
    procs = []
    for local in range(here):
        task = dict(env, SLURM_PROCID=str(first + local), SLURM_LOCALID=str(local),
                    SLURM_STEP_NUM_TASKS=str(step), SLURM_NTASKS=str(step))  # fmt: skip
        pipe = subprocess.PIPE if label else None
        err = subprocess.STDOUT if label else None
        procs.append(subprocess.Popen(command, env=task, stdout=pipe, stderr=err, text=True))

    def relay(proc: subprocess.Popen, rank: int) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(f"{rank}: {line}")
            sys.stdout.flush()

    threads = [
        threading.Thread(target=relay, args=(p, first + i)) for i, p in enumerate(procs) if label
    ]
    for t in threads:
        t.start()
    codes = [p.wait() for p in procs]
    for t in threads:
        t.join()
    sys.exit(max([abs(c) for c in codes] or [0]))


if __name__ == "__main__":
    main()
