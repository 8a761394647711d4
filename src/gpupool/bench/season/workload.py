"""The season's workload: a plain Python script (no gpupool import) that keeps its own record
in a file of its own — when it started and ended, on which node, as which job, allocation and
tenant, with which cards visible — so the checker judges from what ran, not from the server."""

from pathlib import Path

SCRIPT = """import signal, time
start = time.time()
stopped = []
signal.signal(signal.SIGTERM, lambda *_: stopped.append(time.time()))  # first: a stop now ends
import json, os, sys
folder, seconds, key = sys.argv[1], float(sys.argv[2]), sys.argv[3]
e = os.environ
name = f"{key}.{e['GPUPOOL_JOB_ID']}.{e['GPUPOOL_ALLOCATION_ID']}.{os.getpid()}.rec"
out = open(os.path.join(folder, name), "a")

def line(**fields):
    out.write(json.dumps(fields) + "\\n")
    out.flush()

gpus = e.get("CUDA_VISIBLE_DEVICES") or e.get("NVIDIA_VISIBLE_DEVICES") or ""
line(start=start, key=key, job=int(e["GPUPOOL_JOB_ID"]),
     allocation=int(e["GPUPOOL_ALLOCATION_ID"]), node=e.get("GPUPOOL_NODE", ""),
     tenant=e.get("GPUPOOL_TENANT", ""), gpus=gpus)
end = start + seconds
while not stopped and time.time() < end:
    time.sleep(max(0.0, min(0.2, end - time.time())))
    line(tick=time.time())
line(end=time.time(), completed=not stopped)
sys.exit(143 if stopped else 0)
"""

TICK_S = 0.2  # the most a killed workload ran past its last line


def install(folder: Path) -> Path:
    """Write the script where the workloads run it from."""
    path = folder / "season_workload.py"
    path.write_text(SCRIPT)
    return path
