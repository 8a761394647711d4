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
