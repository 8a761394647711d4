#!/bin/bash
# reconstruction of github.com/gaurikadiwan/pytorch slurm.sh: its "--mem=32G" line lost its
# "#SBATCH", so sbatch stops reading directives there and never sees the partition or gres
#SBATCH --job-name=test
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=16
#SBATCH
--mem=32G
#SBATCH --partition=gpu
#SBATCH --gres=gpu:1
