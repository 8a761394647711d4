#!/bin/bash
# reconstruction of github.com/Svdvoort/Radiomics-GPU-Server Examples/SLURM_script.sh
#SBATCH --ntasks=6
#SBATCH --mem=14G
#SBATCH --gres=gpu:Quadro:1
#SBATCH -t 01:00:00
#SBATCH -o /path/to/out/out_%j.log
#SBATCH -e /path/to/out/error_%j.log

echo "Hello world"
