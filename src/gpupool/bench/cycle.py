"""``gpupool bench cycle``: one full scheduling cycle over a large queue with many tenants."""

import random
import time
from typing import Any

from gpupool.bench.placement import peak_rss_mb
from gpupool.bench.synthetic import job_mix, synthetic_cluster
from gpupool.model import Job, JobKind
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

CLASS_BY_KIND = {
    JobKind.INFERENCE: "online-inference",
    JobKind.TRAINING: "training",
    JobKind.DEV: "dev-test",
    JobKind.BATCH: "dev-test",
}


def bench_tenants(count: int, cards: int) -> list[Tenant]:
    """``count`` teams in orgs of ten; each team is guaranteed an equal slice of the cards
    and may borrow up to half as much again."""
    share = cards / count
    tenants = [Tenant(f"org-{i}") for i in range((count + 9) // 10)]
    tenants += [
        Tenant(f"team-{i:03d}", f"org-{i // 10}", {"gpu": Quota.cards(share, borrowing=share / 2)})
        for i in range(count)
    ]
    return tenants


def _assign(jobs: list[Job], tenants: int, rng: random.Random, t0: float) -> list[Job]:
    out = []
    for i, j in enumerate(jobs):
        out.append(
            Job(
                id=j.id,
                request=j.request,
                tenant=f"team-{rng.randrange(tenants):03d}",
                kind=j.kind,
                priority_class=CLASS_BY_KIND[j.kind],
                submit_time=t0 + i * 0.001,
                max_runtime_s=rng.choice([None, 3600, 4 * 3600, 24 * 3600]),
            )
        )
    return out


def run_cycle_bench(
    nodes: int,
    gpus_per_node: int,
    pending: int,
    tenants: int,
    seed: int = 0,
    requests: str = "synthetic",
    defrag_moves: int = 0,
) -> dict[str, Any]:
    """Fill ~half the cluster with running work from a skewed subset of tenants (so some
    borrow), then time one cycle over ``pending`` new jobs from every tenant. With
    ``defrag_moves``, the defragment action runs too, over every blocked job within its
    guarantee (as if all had waited long enough: its worst case)."""
    rng = random.Random(seed)
    cluster = synthetic_cluster(nodes, gpus_per_node, seed)
    cards = nodes * gpus_per_node
    warm_jobs = job_mix(requests, max(1, cards // 2), seed + 7)
    heavy = max(1, tenants // 5)  # a fifth of the teams did most of the earlier work
    warm = _assign(warm_jobs, heavy, rng, 0.0)
    warm = [Job(**{**_fields(j), "id": f"run-{j.id}"}) for j in warm]
    first = run_cycle(ClusterState(cluster), [], warm, TenantTree(bench_tenants(tenants, cards)), 0)
    by_id = {j.id: j for j in warm}
    running = [RunningJob(by_id[b.job_id], b.placement, 0.0, b.borrowed) for b in first.bindings]

    queue = _assign(job_mix(requests, pending, seed), tenants, rng, 100.0)
    tree = TenantTree(bench_tenants(tenants, cards))
    start = time.perf_counter()
    state = ClusterState(cluster)  # the snapshot build is part of a cycle in the server
    built = time.perf_counter()
    config = CycleConfig(defrag_moves=defrag_moves, defrag_after_s=0, defrag_checkpoint_s=0)
    result = run_cycle(state, running, queue, tree, 200.0, config=config)
    elapsed = time.perf_counter() - start
    state.check_invariants()
    return {
        "nodes": nodes,
        "pending": pending,
        "tenants": tenants,
        "requests": requests,
        "running_before": len(running),
        "cycle_ms": round(elapsed * 1000, 1),
        "snapshot_ms": round((built - start) * 1000, 1),
        "admitted": result.admitted,
        "admissions_per_s": round(result.admitted / elapsed, 1) if elapsed else None,
        "preemptions": len(result.preemptions),
        "defrag_moves": defrag_moves,
        "replica_copies": len(result.replacements),
        "peak_rss_mb": peak_rss_mb(),
    }


def _fields(job: Job) -> dict:
    return {name: getattr(job, name) for name in job.__dataclass_fields__}
