#!/bin/sh
# A hyper-parameter sweep as a job array (gpupool job submit examples/sweep.sh): 8 trials, at
# most 2 at a time, each on one card; `gpupool job wait ID` saves each trial's log.
#GPUPOOL --tenant devtest --gpu 1 --time 5:00 --array 0-7%2 --name sweep
#GPUPOOL --output logs/sweep-%a.out
echo "trial $GPUPOOL_ARRAY_TASK_ID of $GPUPOOL_ARRAY_TASK_COUNT on $GPUPOOL_NODE"
