"""Run a season end to end and return its scorecard (a dict, printed as JSON by the CLI):
start the plane, create the teams, replay the plan while the fault schedule runs, wait for
the work to end, read everything back and hand it to the checker."""

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gpupool.bench.season import check
from gpupool.bench.season.faults import AGENT_KILL, SERVER_KILL, Fault, FaultLog, run_faults
from gpupool.bench.season.plane import Plane
from gpupool.bench.season.records import Submission, metered, read_records
from gpupool.bench.season.schedule import (
    TEAMS,
    Plan,
    guarantees,
    openb_plan,
    synthetic_plan,
    with_reclaim_probe,
)
from gpupool.bench.season.submitter import Submitter
from gpupool.bench.season.workload import install
from gpupool.model import SpecError
from gpupool.server.auth import create_user_token
from gpupool.server.db.engine import Database
from gpupool.sim.traces.default_trace import POD_FILE, candidates

ORGANISATION = "season-org"
NOT_CHECKED = (
    "prices: billing is compared in card-seconds; invoice lines x the price in force, a "
    "mid-month price change and budgets are not replayed yet",
    "fairness of borrowing against weights (invariant 4)",
    "services' SLO minutes and harvest (invariant 5): no ServeGen-driven service runs yet",
    "utilisation against gpupool simulate on the same trace (invariant 6): measured, not compared",
    "cycle p99 and the worst minute (invariant 7): only the submission latency is measured",
    "PostgreSQL outages, leader fail-over, link cuts, agent upgrade, node removal, backup "
    "and restore: the season runs one server on SQLite",
    "Slurm arrays and gangs, notebooks, reservations",
)


@dataclass(frozen=True)
class SeasonSize:
    agent_processes: int
    nodes_per_process: int
    cards_per_node: int
    jobs: int  # taken from the trace (plus the reclaim probe's)
    replay_s: float  # the trace window compressed into this
    run_bounds_s: tuple[float, float]  # each job's run time held within
    drain_s: float  # after the replay, how long the work may take to end
    repeat_every: int = 7  # every n-th message sent twice
    bound_s: float = 60.0  # invariant 3: an owed job starts within this (server up)
    billing: check.BillingTolerance = field(default_factory=check.BillingTolerance)  # inv. 2

    @property
    def cards(self) -> int:
        return self.agent_processes * self.nodes_per_process * self.cards_per_node


SMALL = SeasonSize(2, 2, 4, jobs=40, replay_s=90, run_bounds_s=(2, 15), drain_s=120)
FULL = SeasonSize(4, 50, 8, jobs=3000, replay_s=3600, run_bounds_s=(5, 600), drain_s=1200)


def find_pods(trace_dir: Path | None) -> tuple[Path | None, str]:
    """The openb pod list in ``trace_dir``, or where the simulate commands look; None (and
    where it looked) when it is nowhere."""
    places = [trace_dir] if trace_dir is not None else candidates()
    for folder in places:
        if (folder / POD_FILE).is_file():
            return folder / POD_FILE, str(folder)
    return None, ", ".join(str(f) for f in places) or "nowhere (no folder named)"


def plan_for(size: SeasonSize, trace_dir: Path | None, seed: int) -> Plan:
    pods, looked = find_pods(trace_dir)
    if pods is not None:
        base = openb_plan(pods, size.jobs, size.replay_s, size.cards_per_node, size.run_bounds_s)
    else:
        base = synthetic_plan(size.jobs, size.replay_s, size.run_bounds_s, seed)
        base = Plan(base.jobs, base.source, f"{base.note} (looked in {looked})", 0, 1.0)
    probe_run = min(size.run_bounds_s[1] * 2, 0.3 * size.replay_s)
    return with_reclaim_probe(base, size.cards, 0.75 * size.replay_s, probe_run)


def _tokens(root: Path) -> tuple[str, str]:
    db = Database(f"sqlite:///{root / 'server' / 'gpupool.db'}")
    try:
        db.migrate()
        with db.write() as s:
            admin = create_user_token(s, "season-admin", "admin")
            agent = create_user_token(s, "season-agents", "agent", node="*")
        return admin, agent
    finally:
        db.dispose()


def _teams(client: httpx.Client, cards: int) -> None:
    """The teams under one organisation: tenants under one root form the cohort that lends
    and borrows idle guarantees (docs/quotas-and-cycle.md)."""
    owed = guarantees(cards)
    r = client.post("/api/v1/tenants", json={"name": ORGANISATION})
    if r.status_code != 201:
        raise SpecError(f"season: creating {ORGANISATION}: {r.status_code} {r.text}")
    for team in TEAMS:
        body = {"name": team.name, "parent": ORGANISATION, "weight": team.weight}
        r = client.post("/api/v1/tenants", json=body)
        if r.status_code != 201:
            raise SpecError(f"season: creating team {team.name}: {r.status_code} {r.text}")
        body = {"resource": "gpu", "nominal": owed[team.name]}
        r = client.put(f"/api/v1/tenants/{team.name}/quotas/gpu", json=body)
        if r.status_code != 200:
            raise SpecError(f"season: quota of {team.name}: {r.status_code} {r.text}")


def _wait_nodes(client: httpx.Client, nodes: int, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        r = client.get("/api/v1/nodes", params={"state": "ready"})
        if r.status_code == 200 and r.json()["total"] >= nodes:
            return
        time.sleep(0.5)
    raise SpecError(f"season: {nodes} nodes did not register within {within_s:g} s")


def _states(client: httpx.Client, acked: list[Submission]) -> dict[int, str]:
    out = {}
    for s in acked:
        r = client.get(f"/api/v1/jobs/{s.job}")
        if r.status_code == 200:
            out[s.job] = r.json()["state"]
    return out


def _wait_done(client: httpx.Client, acked: list[Submission], within_s: float) -> dict[int, str]:
    deadline = time.monotonic() + within_s
    while True:
        with_errors: dict[int, str] = {}
        with contextlib.suppress(httpx.HTTPError):  # the server away a moment: not yet
            with_errors = _states(client, acked)
        if with_errors and all(v not in check.STILL_GOING for v in with_errors.values()):
            return with_errors
        if time.monotonic() > deadline:
            return with_errors
        time.sleep(1.0)


def _usage(client: httpx.Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        r = client.get("/api/v1/usage", params={"limit": 500, "offset": len(items)})
        r.raise_for_status()
        page = r.json()
        items += page["items"]
        if not page["items"] or len(items) >= page["total"]:
            return items


def _p99_ms(values: list[float]) -> float | None:
    return check._p99([v * 1000 for v in values]) if values else None


def run_season(
    size: SeasonSize, trace_dir: Path | None, seed: int = 0, keep: Path | None = None
) -> dict[str, Any]:
    """``keep``: leave the season's folder (records, logs, database) there, else removed."""
    began_wall = time.monotonic()
    plan = plan_for(size, trace_dir, seed)
    root = Path(tempfile.mkdtemp(prefix="gpupool-season-")) if keep is None else keep
    for sub in ("server", "records", "work"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "records", 0o777)  # workloads may run as the tenants' users
    script = install(root)
    admin, agent = _tokens(root)
    names = [
        [f"season-{p}-{n:03d}" for n in range(size.nodes_per_process)]
        for p in range(size.agent_processes)
    ]
    plane = Plane(root, agent, names, f"simulated:{size.cards_per_node}xA100-80G")
    stop = threading.Event()
    try:
        plane.start_server()
        for i in range(size.agent_processes):
            plane.start_host(i)
        headers = {"Authorization": f"Bearer {admin}"}
        with httpx.Client(base_url=plane.url, headers=headers, timeout=30) as client:
            _teams(client, size.cards)
            _wait_nodes(client, size.agent_processes * size.nodes_per_process, 120)
            submitter = Submitter(
                plane.url, admin, str(script), str(root / "records"), size.repeat_every
            )
            started = time.time()
            faults = FaultLog()
            schedule = [
                Fault(SERVER_KILL, 0.2 * size.replay_s),
                Fault(AGENT_KILL, 0.45 * size.replay_s),
            ]
            fault_thread = threading.Thread(
                target=run_faults, args=(plane, schedule, started, stop, faults)
            )
            fault_thread.start()
            submitter.run(list(plan.jobs), started, stop, give_up_s=120)
            fault_thread.join()
            replayed = time.time()
            states = _wait_done(client, submitter.acked, size.drain_s)
            time.sleep(3.0)  # the last releases metered
            usage = metered(_usage(client))
            states = _states(client, submitter.acked)
    finally:
        stop.set()
        plane.stop()
    records = read_records(root / "records")
    cards_of = {j.key: j.cards for j in plan.jobs}
    unfinished = {j for j, s in states.items() if s in check.STILL_GOING}
    verdicts = {
        "nothing_lost_nothing_twice": check.nothing_lost_nothing_twice(
            submitter.acked, records, states
        ),
        "billing_equals_run_time": check.billing_matches_runs(
            records, usage, unfinished, size.billing
        ),
        "guarantee_served_within_bound": check.guarantee_served(
            submitter.acked,
            records,
            guarantees(size.cards),
            size.cards,
            size.bound_s,
            faults.server_down,
        ),
    }
    card = {
        "size": asdict(size) | {"cards": size.cards},
        "backend": "sqlite, one server",
        "trace": {"source": plan.source, "note": plan.note, "jobs": len(plan.jobs)},
        "teams": {
            t.name: {"weight": t.weight, "guarantee_cards": guarantees(size.cards)[t.name]}
            for t in TEAMS
        },
        "faults": faults.done,
        "submissions": {
            "acknowledged": len(submitter.acked),
            "refused": submitter.refused,
            "retried": submitter.retries,
            "sent_twice": sum(1 for s in submitter.acked if s.repeats),
        },
        "figures": {
            "submit_p99_ms": _p99_ms(submitter.latencies_s),
            "utilisation": check.utilisation(records, cards_of, size.cards, started, replayed),
            "replay_s": round(replayed - started, 1),
            "wall_s": round(time.monotonic() - began_wall, 1),
        },
        "invariants": {name: v.as_json() for name, v in verdicts.items()},
        "not_checked": list(NOT_CHECKED),
        "folder": None,
    }
    if keep is not None or not all(v.held for v in verdicts.values()):  # to judge again
        log = {
            "submissions": [asdict(x) for x in submitter.acked],
            "states": states,
            "usage": [asdict(m) for m in usage],
        }
        (root / "season-log.json").write_text(json.dumps(log))
    if keep is None and all(v.held for v in verdicts.values()):
        shutil.rmtree(root, ignore_errors=True)
    else:  # kept, or a counter-example's evidence
        card["folder"] = str(root)
    return card
