"""What must hold in the state of record whatever happened: no device granted twice, no job
holding two allocations, every job's state the last one its events recorded."""

from collections import Counter, defaultdict

from sqlalchemy import select

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import AllocationRow, DeviceRow, JobEventRow, JobRow


def assert_consistent(db: Database) -> dict[str, int]:
    """Raise AssertionError on any inconsistency; returns job counts per state."""
    with db.read() as s:
        jobs = {j.id: j.state for j in s.execute(select(JobRow)).scalars()}
        allocs = list(
            s.execute(select(AllocationRow).where(AllocationRow.state == "active")).scalars()
        )
        memory = {(d.node, d.index): d.memory_mib for d in s.execute(select(DeviceRow)).scalars()}
        last: dict[int, str] = {}
        for job_id, to_state in s.execute(
            select(JobEventRow.job_id, JobEventRow.to_state).order_by(JobEventRow.id)
        ):
            last[job_id] = to_state
    per_job = Counter(a.job_id for a in allocs)
    assert all(n == 1 for n in per_job.values()), "a job holds two allocations"
    for job_id, state in jobs.items():
        holds = per_job.get(job_id, 0)
        assert holds == (1 if state in ("admitted", "running") else 0), (job_id, state, holds)
        assert last.get(job_id) == state, (
            f"job {job_id}: state {state}, last event {last.get(job_id)}"
        )
    exclusive: Counter[tuple[str, int]] = Counter()
    compute: dict[tuple[str, int], int] = defaultdict(int)
    mem: dict[tuple[str, int], int] = defaultdict(int)
    sharers: Counter[tuple[str, int]] = Counter()
    for a in allocs:
        for n in a.placement["nodes"]:
            for d in n["devices"]:
                key = (n["node"], d["device"])
                if d["exclusive"]:
                    exclusive[key] += 1
                else:
                    sharers[key] += 1
                compute[key] += d["compute_pct"]
                mem[key] += d["mem_mib"]
    for key, n in exclusive.items():
        assert n == 1 and sharers[key] == 0, f"device {key} granted twice"
    for key in compute:
        assert compute[key] <= 100, f"device {key} compute over-committed"
        assert mem[key] <= memory[key], f"device {key} memory over-committed"
    return dict(Counter(jobs.values()))
