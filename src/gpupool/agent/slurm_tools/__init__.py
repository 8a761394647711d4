"""``srun`` and ``scontrol`` as a job submitted with ``gpupool sbatch`` finds them on its
``PATH`` (copied into its folder by the agent; stdlib only, run by the node's python3)."""
