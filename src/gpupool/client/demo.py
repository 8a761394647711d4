"""``gpupool up --demo``: a realistic mix of jobs for the seed's three teams, so the pool is busy
within a minute. Training runs for the algorithm team (single-node and a 2-node gang),
long-lived inference services, short dev/test jobs. Every job is a real process that prints its
progress; idempotency keys make a restart with ``--demo`` submit nothing twice."""

import random
import ssl
import time

import httpx

WORKLOAD = """
import os, sys, time
kind, seconds = sys.argv[1], float(sys.argv[2])
env = os.environ
print(f"{kind} on {env.get('GPUPOOL_NODE')}: {env.get('CUDA_VISIBLE_DEVICES')}", flush=True)
start, step = time.time(), 0
while time.time() - start < seconds:
    step += 1
    if kind == "training":
        print(f"step {step} loss {2.5 / (1 + step / 50):.4f}", flush=True)
    elif kind == "inference":
        print(f"served {step * 37} requests", flush=True)
    else:
        print(f"test {step} ok", flush=True)
    time.sleep(5)
"""


def demo_jobs(seed: int = 1) -> list[dict]:
    rng = random.Random(seed)

    def job(tenant: str, request: str, kind: str, klass: str, seconds: float, **extra) -> dict:
        return {
            "tenant": tenant,
            "request": request,
            "kind": kind,
            "priority_class": klass,
            # the node's python3: workloads may run as a tenant's user, who cannot always run
            # the interpreter gpupool was installed with (a virtualenv under /root, say)
            "command": ["python3", "-c", WORKLOAD, kind, str(round(seconds))],
            **extra,
        }

    jobs = [
        job("algorithm", "gpu=A100-80G:4", "training", "training", rng.uniform(600, 1800))
        for _ in range(4)
    ]
    # held until the rest is in (submit_demo releases it): a cycle between its submission and
    # the next ones let it borrow idle cards no one had asked for yet, and the demo's queue
    # (the README's walkthrough) came out differently from one start to the next
    jobs.append(
        job("algorithm", "gpu=A100-80G:4", "training", "training", 1200, gang_size=2, hold=True)
    )
    jobs += [job("algorithm", "gpu=2", "training", "training", rng.uniform(300, 900))]
    jobs += [job("inference", "gpu=1", "inference", "online-inference", 86400) for _ in range(6)]
    jobs += [job("devtest", "gpu=1", "dev", "dev-test", rng.uniform(60, 300)) for _ in range(10)]
    for n, j in enumerate(jobs):
        j["name"] = f"demo-{j['kind']}-{n}"
        j["idempotency_key"] = f"gpupool-demo-{n}"
    return jobs


def submit_demo(
    url: str,
    token: str,
    nodes: int,
    timeout_s: float = 60,
    verify: ssl.SSLContext | bool = True,
) -> int:
    """Wait for ``nodes`` nodes to register, then submit the mix; returns jobs submitted."""
    with httpx.Client(
        base_url=url + "/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        verify=verify,
    ) as c:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if c.get("/nodes", params={"state": "ready"}).json()["total"] >= nodes:
                    break
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        count, held = 0, []
        for body in demo_jobs():
            r = c.post("/jobs", json=body)
            if r.status_code in (200, 201):
                count += 1
                if body.get("hold"):
                    held.append(r.json()["id"])
        for job_id in held:  # everyone's work is in: the same queue every time
            c.post(f"/jobs/{job_id}/release")  # released already (a restart): a 409, fine
        return count
