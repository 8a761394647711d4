"""The cycle decides exactly as it did: 300 random clusters (cards whole, shared and MIG;
nested tenants with guarantees, borrowing and lending limits; priority classes; time limits;
jobs that forbid preemption; defragmentation on or off) go through two cycles, and every
decision — bindings with their placements and actions, preemptions with their reasons,
pending reasons, expected starts — must match what the cycle decided when it was recorded
(``tests/data/cycle_decisions.json``, written by the cycle before it was split into action
modules). A change of decisions on purpose is recorded again with
``GPUPOOL_RECORD_CYCLES=1 pytest tests/unit/test_cycle_equivalence.py``."""

import hashlib
import json
import os
import random

from gpupool.model import Job, JobKind, Node, SharingMode, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from tests.support.paths import DATA

RECORD = DATA / "cycle_decisions.json"
SEEDS = range(300)
SPECS = [
    "gpu=1", "gpu=2", "gpu=4", "gpu=8", "gpu=1,cpu=8", "gpu_share=0.5", "gpu_share=0.25",
    "mig=3g.40gb", "mig=1g.10gb", "cpu=4", "gpu=2,topology=nvlink",
]  # fmt: skip
CLASSES = ["online-inference", "training", "dev-test"]


def scenario(seed: int):
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(2, 6)):
        mode = rng.choice([SharingMode.WHOLE] * 3 + [SharingMode.SHARE, SharingMode.MIG])
        cards = rng.choice([2, 4, 8])
        devices = make_devices("A100-80G", cards, node=f"n{i}", mode=mode, island_size=4)
        nodes.append(Node(f"n{i}", 64000, 512 * 1024, devices))
    teams = [f"t{i}" for i in range(rng.randint(2, 4))]
    tenants = [Tenant("org"), Tenant("lab", "org")]
    for t in teams:
        parent = rng.choice(["org", "lab"])
        quota = Quota.cards(
            rng.randint(0, 8),
            rng.choice([None, 0, 2, 6]),
            rng.choice([None, 0, 2]),
        )
        tenants.append(Tenant(t, parent, {"gpu": quota}))

    def jobs(prefix: str, n: int, t0: float) -> list[Job]:
        out = []
        for i in range(n):
            out.append(
                Job(
                    f"{prefix}{i}",
                    parse_request(rng.choice(SPECS)),
                    tenant=rng.choice(teams),
                    kind=rng.choice(list(JobKind)),
                    priority_class=rng.choice(CLASSES),
                    priority=rng.choice([0, 0, 5]),
                    gang_size=rng.choice([1, 1, 1, 2]),
                    max_runtime_s=rng.choice([None, 600, 3600]),
                    submit_time=t0 + i,
                    on_preempt=rng.choice(["suspend", "suspend", "kill"]),
                )
            )
        return out

    reservations = []
    if rng.random() < 0.3:
        reservations.append(Reservation("r1", rng.choice(teams), ("n0",), 0.0, 10**9))
    config = CycleConfig(defrag_moves=rng.choice([0, 0, 2, 4]), defrag_after_s=100)
    # the moved jobs' checkpoints (the gain-beats-cost rule), without drawing from rng: the
    # rest of the scenario stays what it was when recorded
    config.defrag_checkpoint_s = 60.0 if seed % 2 else 3600.0
    policy = rng.choice(["auto", "best-fit", "fgd", "spread"])
    config.policy = policy
    first = jobs("a", rng.randint(3, 14), 0.0)
    later = rng.choice([1000.0, 3900.0])  # the second cycle; at 3900 the waiting starve
    second = jobs("b", rng.randint(2, 12), later - 700)
    return nodes, tenants, first, second, reservations, config, later


def decisions(result) -> dict:
    def placement(p):
        return [
            [n.node, n.cpu_millis, n.mem_mib,
             [[d.device, d.compute_pct, d.mem_mib, d.exclusive, d.mig_profile, d.mig_start]
              for d in n.devices]]
            for n in p.nodes
        ]  # fmt: skip

    out = {
        "bindings": [
            [b.job_id, b.action, b.borrowed, list(b.after), placement(b.placement)]
            for b in result.bindings
        ],
        "preemptions": [
            [p.job_id, p.by, p.reason, p.grace_s, p.action] for p in result.preemptions
        ],
        "pending": sorted((job, str(why)) for job, why in result.pending.items()),
        "starts_by": sorted(result.starts_by.items()),
    }
    if result.replacements:  # (make-before-break copies: recorded since they exist)
        out["replacements"] = [
            [r.job_id, r.by, r.reason, placement(r.placement)] for r in result.replacements
        ]
    return out


def run(seed: int) -> list[dict]:
    nodes, tenants, first, second, reservations, config, later = scenario(seed)
    out = []
    r1 = run_cycle(ClusterState(nodes), [], first, TenantTree(tenants), 0.0, reservations, config)
    out.append(decisions(r1))
    by_id = {j.id: j for j in first}
    running = [RunningJob(by_id[b.job_id], b.placement, 0.0, b.borrowed) for b in r1.bindings]
    waiting = [j for j in first if j.id not in {b.job_id for b in r1.bindings}] + second
    r2 = run_cycle(
        ClusterState(nodes), running, waiting, TenantTree(tenants), later, reservations, config
    )
    out.append(decisions(r2))
    return out


def digest(seed: int) -> str:
    return hashlib.sha256(json.dumps(run(seed), sort_keys=True).encode()).hexdigest()[:16]


def test_decisions_are_the_recorded_ones():
    now = {str(seed): digest(seed) for seed in SEEDS}
    if os.environ.get("GPUPOOL_RECORD_CYCLES"):
        RECORD.write_text(json.dumps(now, indent=0, sort_keys=True) + "\n")
    recorded = json.loads(RECORD.read_text())
    changed = [s for s in now if now[s] != recorded.get(s)]
    detail = json.dumps(run(int(changed[0])), indent=1)[:4000] if changed else ""
    assert changed == [], (
        f"{len(changed)} scenarios decide differently, e.g. seed {changed[:5]}:\n{detail}"
    )


def test_the_scenarios_exercise_every_action():
    actions: dict[str, int] = {}
    preempted = copied = 0
    for seed in SEEDS:
        for cycle in run(seed):
            for b in cycle["bindings"]:
                actions[b[1]] = actions.get(b[1], 0) + 1
            preempted += len(cycle["preemptions"])
            copied += len(cycle.get("replacements", ()))
    assert set(actions) == {"allocate", "borrow", "preempt", "reclaim", "backfill", "defragment"}
    assert preempted > 0 and copied > 0
