#!/bin/bash
# reconstruction of github.com/rkenny/4960A SUGER/submit.beluga.sh
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=1
#SBATCH --gpus-per-node=1
#SBATCH --mem-per-cpu=8G
python train.py
