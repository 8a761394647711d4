#!/bin/bash
# reconstruction of github.com/csc-training/intro-to-dl day2/run-hvd.sh (several options a
# line; the spaced-out "#S B A TCH" line is a comment)
#SBATCH -A project_2002238 -N 1 -n 2
#SBATCH -c 20 -p gpu --gres=gpu:v100:2 -t 1:00:00 --mem=64G
# # # # #S B A TCH --reservation dlintro

module load tensorflow/2.0.0-hvd
srun python3.7 $*
