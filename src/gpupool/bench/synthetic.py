"""Seeded synthetic clusters and job mixes for benchmarks and property tests."""

import random

from gpupool.model import Job, JobKind, Node, make_devices, parse_request
from gpupool.sharing import PoolSharing

# (model, cards per node, cpu cores, memory GiB, weight, sharing); the bench gives every
# type --gpus-per-node cards so that the card count is exactly nodes x gpus-per-node.
NODE_TYPES: tuple[tuple[str, int, int, int, int, PoolSharing], ...] = (
    ("A100-80G", 8, 128, 1024, 30, PoolSharing("hybrid", mig_per_node=2)),
    ("H100-80G", 8, 192, 2048, 15, PoolSharing("whole")),
    ("H200-141G", 8, 192, 2048, 5, PoolSharing("mig")),
    ("A100-40G", 8, 96, 1024, 10, PoolSharing("share")),
    ("L40S", 4, 64, 512, 10, PoolSharing("share")),
    ("RTX4090", 8, 64, 512, 10, PoolSharing("share")),
    ("T4", 4, 32, 256, 8, PoolSharing("share")),
    ("Ascend910B", 8, 192, 1024, 7, PoolSharing("whole")),
    ("MLU370", 8, 64, 512, 3, PoolSharing("whole")),
    ("K100", 8, 64, 512, 2, PoolSharing("whole")),
)

# (spec, kind, weight): whole, multi-card, MIG, fractional and CPU-only work.
JOB_MIX: tuple[tuple[str, JobKind, int], ...] = (
    ("gpu=1,cpu=8,mem=64GiB", JobKind.TRAINING, 22),
    ("gpu=2,cpu=16,mem=128GiB", JobKind.TRAINING, 6),
    ("gpu=4,cpu=32,mem=256GiB,topology=nvlink", JobKind.TRAINING, 4),
    ("gpu=8,cpu=64,mem=512GiB", JobKind.TRAINING, 2),
    ("gpu=A100-80G:1,cpu=8,mem=64GiB", JobKind.TRAINING, 4),
    ("gpu=1,vendor=ascend,cpu=16,mem=64GiB", JobKind.TRAINING, 2),
    ("mig=1g.10gb,cpu=2,mem=16GiB", JobKind.INFERENCE, 6),
    ("mig=3g.40gb,cpu=8,mem=32GiB", JobKind.INFERENCE, 3),
    ("mig=2g.35gb,cpu=4,mem=32GiB", JobKind.INFERENCE, 2),
    ("gpu_share=0.5,gpu_mem=10GiB,cpu=4,mem=16GiB", JobKind.DEV, 14),
    ("gpu_share=0.25,cpu=2,mem=8GiB", JobKind.DEV, 10),
    ("gpu_mem=20GiB,cpu=4", JobKind.DEV, 8),
    ("gpu_share=0.3,gpu_mem=6GiB,cpu=2,mem=8GiB", JobKind.INFERENCE, 10),
    ("cpu=4,mem=16GiB", JobKind.BATCH, 7),
)


def synthetic_cluster(nodes: int, gpus_per_node: int = 8, seed: int = 0) -> list[Node]:
    """``nodes`` servers drawn from NODE_TYPES; 8-card types get ``gpus_per_node`` cards."""
    rng = random.Random(seed)
    weights = [t[4] for t in NODE_TYPES]
    out: list[Node] = []
    for i in range(nodes):
        model, cards, cores, gib, _, sharing = rng.choices(NODE_TYPES, weights)[0]
        cards = gpus_per_node
        name = f"node-{i:05d}"
        devices = make_devices(model, cards, node=name, island_size=max(cards // 2, 1))
        node = Node(name, cores * 1000, gib * 1024, devices, labels={"model": model})
        out.append(sharing.apply(node))
    return out


def synthetic_jobs(count: int, seed: int = 0) -> list[Job]:
    rng = random.Random(seed + 1)
    requests = {spec: parse_request(spec) for spec, _, _ in JOB_MIX}
    weights = [w for _, _, w in JOB_MIX]
    jobs: list[Job] = []
    for i in range(count):
        spec, kind, _ = rng.choices(JOB_MIX, weights)[0]
        jobs.append(Job(id=f"job-{i:06d}", request=requests[spec], kind=kind, submit_time=i))
    return jobs


REQUEST_MIXES = ("synthetic", "openb", "distinct")


def openb_jobs(count: int, seed: int = 0, pods_path: str | None = None) -> list[Job]:
    """``count`` jobs sampled (seeded, with replacement) from the openb pod list's own
    requests: CPU, memory, GPU count and fractional share as Alibaba's pods asked for them."""
    from pathlib import Path

    from gpupool.model import SpecError
    from gpupool.sim.traces.default_trace import default_openb
    from gpupool.sim.traces.openb import load_pods

    try:
        _, pods_file = default_openb(None, Path(pods_path) if pods_path else None)
    except FileNotFoundError as exc:
        raise SpecError(f"--requests openb: {exc}") from None
    pods, _ = load_pods(pods_file)
    if not pods:
        raise SpecError(f"--requests openb: no pods in {pods_file}")
    rng = random.Random(seed + 2)
    out = []
    for i in range(count):
        pod = pods[rng.randrange(len(pods))]
        kind = JobKind.BATCH if pod.request.gpu_count == 0 else JobKind.TRAINING
        out.append(Job(id=f"job-{i:06d}", request=pod.request, kind=kind, submit_time=i))
    return out


def distinct_jobs(count: int, seed: int = 0) -> list[Job]:
    """The synthetic mix with every request made unique: each job asks for up to 1 GiB more
    host memory and a few more millicores than the one before (so no per-request cache hits)."""
    from dataclasses import replace

    out = []
    for i, j in enumerate(synthetic_jobs(count, seed)):
        request = replace(
            j.request,
            mem_mib=j.request.mem_mib + i % 1024,
            cpu_millis=j.request.cpu_millis + i // 1024,
        )
        out.append(replace(j, request=request))
    return out


def job_mix(requests: str, count: int, seed: int = 0, pods_path: str | None = None) -> list[Job]:
    """Jobs of the named request mix: ``synthetic`` (14 request shapes), ``openb`` (sampled
    from the openb trace's pods) or ``distinct`` (no two requests alike)."""
    if requests == "openb":
        return openb_jobs(count, seed, pods_path)
    if requests == "distinct":
        return distinct_jobs(count, seed)
    if requests != "synthetic":
        from gpupool.model import SpecError

        raise SpecError(f"requests: {requests!r} is not one of {', '.join(REQUEST_MIXES)}")
    return synthetic_jobs(count, seed)
