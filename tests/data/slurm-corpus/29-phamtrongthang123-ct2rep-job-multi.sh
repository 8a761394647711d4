#!/bin/bash
# reconstruction of github.com/phamtrongthang123/CT2Rep job_multi.sh (directives as there)
#SBATCH --job-name=CT2Rep
#SBATCH --time=3-00:00:00
#SBATCH --output=logs_multi/%j_%N.out
#SBATCH --error=logs_multi/%j_%N.err
#SBATCH --distribution=cyclic

# Heterogeneous job component 1: A cluster
#SBATCH --nodes=4
#SBATCH --partition=vgpu
#SBATCH --ntasks-per-node=1
#SBATCH --constraint=public&1v100
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=32

# Heterogeneous job component 2: BB cluster
#SBATCH hetjob
#SBATCH --partition=vgpu
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --constraint=public&1v100
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=32

srun --het-group=0 --nodes=$SLURM_JOB_NUM_NODES_HET_GROUP_0 --ntasks-per-node=1 bash -c "bash train_apptainer.sh" &
srun --het-group=1 --nodes=$SLURM_JOB_NUM_NODES_HET_GROUP_1 --ntasks-per-node=1 bash -c "bash train_apptainer.sh" &
wait
