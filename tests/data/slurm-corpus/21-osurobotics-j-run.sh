#!/bin/bash
# reconstruction of github.com/OSUrobotics/mojo-grasp j_run.sh
#SBATCH -J YourNameHere                        # name of job
#SBATCH -p dgx2                                  # name of partition or queue
#SBATCH --array=1-2                    # how many tasks in the array
#SBATCH -o log/LOG-%a.out                 # name of output file
#SBATCH -e log/ERROR-%a.err                 # name of error file
#SBATCH --mem=10G
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-gpu 16
#SBATCH -t 1-00:00:00

srun --export=ALL python3 run_hpc_multi.py $SLURM_ARRAY_TASK_ID $SLURM_CPUS_PER_GPU
