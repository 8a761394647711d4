#!/usr/bin/env bash
# Real-GPU check for the node agent (issue 7). On a machine with an NVIDIA GPU:
#   1. discover the GPU through NVML (gpupool devices),
#   2. register it with a local server through a real agent (cards offered as shares),
#   3. run two fractional-share jobs on it and show the memory each one sees and may take,
#   4. show that the memory watchdog (NVML per-process memory) stops the job over its grant.
# Usage: scripts/gpu-check.sh   (from a checkout with gpupool installed; PYTHON overrides python)
# Output goes to stdout; keep it in docs/gpu-check.md.
# GPU_CHECK_DEVICES=simulated:1xA100-80G rehearses the plumbing on a machine without a GPU
# (the CUDA probe then fails to load libcuda, and the verdict says so).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
GP="$PY -m gpupool.cli.main"
PYEXE=$($PY -c 'import sys; print(sys.executable)')  # workloads run in their own directory
WORK=$(mktemp -d /tmp/gpupool-gpu-check.XXXX)
PORT=$($PY -c 'from gpupool.server.process import free_port; print(free_port())')
URL=http://127.0.0.1:$PORT
MPS_STARTED=0
cleanup() {
  [ -n "${AGENT_PID:-}" ] && kill "$AGENT_PID" 2>/dev/null
  [ -n "${SERVER_PID:-}" ] && kill "$SERVER_PID" 2>/dev/null
  [ "$MPS_STARTED" = 1 ] && echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  pkill -f "gpupool-gpu-check" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT
section() { printf '\n## %s\n\n' "$*"; }

section "machine"
DEVICES=${GPU_CHECK_DEVICES:-auto}
date -u; uname -r
if [ "$DEVICES" = auto ]; then
  nvidia-smi -L || { echo "no nvidia-smi: not a GPU machine"; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,driver_version,mig.mode.current --format=csv
fi

section "1. discovery through NVML"
$GP devices --devices "$DEVICES" --json | tee "$WORK/devices.json"

section "2. server + agent (cards offered as fractional shares)"
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && MPS_STARTED=1 && echo "MPS control daemon started"
else
  echo "no nvidia-cuda-mps-control: MPS limits are set but nothing enforces them; the watchdog must"
fi
ADMIN=$($GP admin token create --data-dir "$WORK" --name admin | awk '{print $NF}')
AGENT=$($GP admin token create --data-dir "$WORK" --name agent --role agent --node '*' | awk '{print $NF}')
GPUPOOL_HEARTBEAT_TIMEOUT_S=60 $GP server --data-dir "$WORK" --port "$PORT" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.2; done
GPUPOOL_AGENT_TOKEN=$AGENT $GP agent --server "$URL" --name gpu-check --devices "$DEVICES" --share \
  --state-dir "$WORK/agent" --heartbeat 1 --grace 3 >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
export GPUPOOL_SERVER=$URL GPUPOOL_TOKEN=$ADMIN GPUPOOL_CONFIG_DIR=$WORK/client
sleep 3
$GP nodes
api() { curl -sf -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' "$@"; }
api -X POST "$URL/api/v1/tenants" -d '{"name":"team-a"}' >/dev/null
api -X PUT "$URL/api/v1/tenants/team-a/quotas/gpu" -d '{"flavour":"gpu","nominal":1}' >/dev/null
TOTAL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0]["memory_mib"])' "$WORK/devices.json")
GRANT=$(( TOTAL / 4 ))   # MiB per share
submit() {  # name share alloc_mib
  api -X POST "$URL/api/v1/jobs" -d "{\"tenant\":\"team-a\",\"name\":\"$1\",\"request\":\"gpu_share=$2%,gpu_mem=${GRANT}MiB\",\"command\":[\"$PYEXE\",\"$PWD/scripts/cuda_probe.py\",\"$3\",\"20\"]}" \
    | $PY -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

section "3. two fractional-share jobs, ${GRANT} MiB each: one within, one over its grant"
WITHIN=$(submit within 40 $(( GRANT / 2 )))
OVER=$(submit over 40 $(( GRANT * 2 )))
echo "job $WITHIN asks for $(( GRANT / 2 )) MiB; job $OVER for $(( GRANT * 2 )) MiB"
for _ in $(seq 60); do
  sleep 1
  S1=$($GP job show "$WITHIN" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  S2=$($GP job show "$OVER" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  case "$S1$S2" in *pending*|*admitted*|*running*) ;; *) break ;; esac
done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv || true
for J in "$WITHIN" "$OVER"; do
  section "job $J"
  $GP job show "$J"
  $GP job logs "$J"
done

section "4. verdict"
$GP job show "$OVER" --json | $PY -c '
import json, sys
j = json.load(sys.stdin)
stopped = j["state"] == "failed" and j["reason"].startswith("device memory")
refused = j["exit_code"] == 3
print("over-limit job:", j["state"], "-", j["reason"])
print("isolation:", "watchdog stopped it" if stopped else "driver refused the allocation" if refused else "NOT ENFORCED")
sys.exit(0 if stopped or refused else 1)'
