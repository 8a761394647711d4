#!/bin/bash
# reconstruction of github.com/lzzppp/trajectory_similarity_experiment
# trajectory_similarity_matrix_learning/produce_similarity.sh (comments after the options)
#SBATCH -J gpu-job            # 任务名字是 gpu-job
#SBATCH --cpus-per-task=4     # 申请 CPU 核心
#SBATCH -p gpu                # 任务提交到 gpu 分区
#SBATCH --gres=gpu:1          # 申请 1 块 GPU 卡
#SBATCH -t 3-00:00:00         # 最长运行时间

python train.py
