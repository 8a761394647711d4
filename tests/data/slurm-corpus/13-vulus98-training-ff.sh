#!/bin/bash
# reconstruction of github.com/vulus98/Rethinking-attention scripts/training_FF.sh
# (gpumem is a generic resource of one site: ETH Euler)
#SBATCH --output=sbatch_log/%j.out
#SBATCH --gpus=4
#SBATCH --mem-per-cpu=16000
#SBATCH --gres=gpumem:20g
#SBATCH --time 600
python -u training_FF.py "$@"
