#!/bin/bash
# reconstruction of github.com/hariharan-devarajan/jobspec-database
# data/CSCfi/machine-learning-scripts/slurm/run-puhti-tf2-hvd.sh
#SBATCH -N 1 -n 4 -c 10 -p gpu --gres=gpu:v100:4 -t 1:00:00 --mem=64G

module load tensorflow
srun python3 $*
