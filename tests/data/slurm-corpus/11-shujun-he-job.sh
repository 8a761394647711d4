#!/bin/bash
# reconstruction of github.com/Shujun-He/RibonanzaNet2 job.sh
#SBATCH --nodes 1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --job-name=shujun-job
#SBATCH --partition defq

accelerate launch --config_file FSDP.yaml run.py --config_path configs/benchmark.yaml
