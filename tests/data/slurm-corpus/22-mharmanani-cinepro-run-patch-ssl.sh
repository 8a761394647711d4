#!/bin/bash
# reconstruction of github.com/mharmanani/cinepro projects/miccai2024/.slurm/run_patch_ssl.sh

#SBATCH -J run
#SBATCH --ntasks=1
#SBATCH -c 16
#SBATCH --gres=gpu:1
#SBATCH --mem=64G
#SBSTCH --partition=a40
#SBATCH --time 3:59:00
#SBATCH --export=ALL
#SBATCH --output=slurm-%j.log
#SBATCH --open-mode=append
#SBATCH --qos=m2

# send this batch script a SIGUSR1 240 seconds
# before we hit our time limit
#SBATCH --signal=B:USR1@240

on_usr1() {
  wait $child_pid
  exit 0
}
trap on_usr1 SIGUSR1
python bk_patch_ssl.py --batch_size 32 &
child_pid=$!
wait $child_pid
