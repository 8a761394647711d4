"""What a job submitted with ``gpupool sbatch`` sees of Slurm on its node: the ``SLURM_*``
variables a Slurm job has, and ``srun`` and ``scontrol show hostnames`` on its ``PATH``.

gpupool starts a job that spans nodes by parts, one a node, each running the batch script;
Slurm runs the script once, on the first node, and its ``srun`` starts the tasks of every node.
So here ``srun CMD`` starts this node's tasks of the step (``--ntasks-per-node``, or ``-n`` over
the nodes) with their ``SLURM_PROCID`` / ``SLURM_LOCALID``, and the script's lines before it
run once a node: the usual ``MASTER_ADDR=$(scontrol show hostnames ... | head -n1)`` then
``srun torchrun ...`` works unchanged; a script that must do something once for the whole job
tests ``SLURM_NODEID``. The job's own ``SLURM_*`` variables of the submission (tasks, CPUs,
GPUs per node) come with the order; this module adds those of the node."""

import os
from pathlib import Path

from gpupool.model.hostlist import compress
from gpupool.model.protocol import OrderOut

MARK = "SLURM_NTASKS"  # set by gpupool sbatch: the job lives by Slurm's variables

TOOLS = Path(__file__).parent / "slurm_tools"


def node_env(order: OrderOut, node: str, workdir: str, cpu_millis: int) -> dict[str, str]:
    """The ``SLURM_*`` variables of this node's part of a job submitted by gpupool sbatch."""
    env = order.env
    if MARK not in env:
        return {}
    nodes = list(dict.fromkeys(n.node for n in order.nodes))
    node_id = nodes.index(node)
    per_node = int(env.get("SLURM_NTASKS_PER_NODE", "1"))
    job_id = str(order.job_id)
    cpus = str(max(1, -(-cpu_millis // 1000)))  # whole CPUs, rounded up
    out = {
        "SLURM_JOB_ID": job_id, "SLURM_JOBID": job_id,
        "SLURM_JOB_NAME": str(order.job_name or ""),
        "SLURM_JOB_NODELIST": compress(nodes), "SLURM_NODELIST": compress(nodes),
        "SLURM_NODEID": str(node_id), "SLURM_PROCID": str(node_id * per_node),
        "SLURM_LOCALID": "0", "SLURMD_NODENAME": node,
        "SLURM_SUBMIT_DIR": str(order.submit_dir or workdir),
        "SLURM_CPUS_ON_NODE": cpus, "SLURM_JOB_CPUS_PER_NODE": cpus,
    }  # fmt: skip
    here = next((n for n in order.nodes if n.node == node), None)
    if here is not None and here.devices:  # the cards granted here (a whole node: all of them)
        out["SLURM_GPUS_ON_NODE"] = str(len(here.devices))
    for part in ("JOB_ID", "TASK_ID", "TASK_COUNT", "TASK_MIN", "TASK_MAX"):
        if f"GPUPOOL_ARRAY_{part}" in env:
            out[f"SLURM_ARRAY_{part}"] = str(env[f"GPUPOOL_ARRAY_{part}"])
    return out


def install_tools(workdir: str, uid: int | None, gid: int | None) -> str:
    """``srun`` and ``scontrol`` in the workload's own folder; returns the folder to put first
    on its ``PATH``."""
    folder = Path(workdir) / ".gpupool-slurm"
    folder.mkdir(mode=0o755, exist_ok=True)
    for name in ("srun", "scontrol"):
        path = folder / name
        path.write_text((TOOLS / f"{name}.py").read_text())
        path.chmod(0o755)
        if uid is not None:
            os.chown(path, uid, gid if gid is not None else -1)
    if uid is not None:
        os.chown(folder, uid, gid if gid is not None else -1)
    return str(folder)
