#!/bin/bash
# reconstruction of github.com/tannonk/muss custom_scripts/test_slurm_job.sh
#SBATCH --time=00:10:00
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=1000
#SBATCH --gres gpu:1

python test_slurm.py
