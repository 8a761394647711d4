"""``gpupool bench ...``: performance figures as JSON (targets live here, not in unit tests)."""

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli import bench_figures, bench_season
from gpupool.cli.errors import friendly
from gpupool.cli.trace_args import DEFAULT_TRACE, trace_files
from gpupool.extras import require
from gpupool.model import SpecError

app = typer.Typer(help="Benchmarks that print measured figures (use --json for machines).")
REQUESTS_HELP = (
    "Request mix: synthetic (14 shapes), openb (sampled from the openb trace's pods; found "
    "as the simulate commands find it) or distinct (no two requests alike)"
)
bench_figures.register(app)
bench_season.register(app)


@app.command("placement")
@friendly
def placement(
    nodes: int = typer.Option(5000, min=1, help="Servers in the synthetic cluster."),
    gpus_per_node: int = typer.Option(8, min=1, max=64, help="Cards per server."),
    jobs: int = typer.Option(20000, min=1, help="Jobs placed one by one."),
    policy: str = typer.Option("first-fit", help="A placement policy (gpupool policies)."),
    seed: int = typer.Option(0, help="Seed of the cluster and job mix."),
    requests: str = typer.Option("synthetic", help=REQUESTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Place a seeded mix of whole, multi-card, MIG, fractional and CPU-only jobs into a
    heterogeneous synthetic cluster, one decision at a time, and report throughput."""
    from gpupool.bench.placement import run_placement_bench
    from gpupool.scheduler import POLICY_NAMES  # numpy: only for the commands that run it

    if policy not in POLICY_NAMES:
        raise SpecError(f"policy: {policy!r} is not one of {', '.join(POLICY_NAMES)}")
    result = run_placement_bench(nodes, gpus_per_node, jobs, policy, seed, requests)
    _emit(result, as_json, f"placement benchmark ({policy})")


@app.command("api")
@friendly
def api(
    nodes: int = typer.Option(1000, min=1, help="Simulated servers registered in the database."),
    gpus_per_node: int = typer.Option(8, min=1, max=64, help="Cards per server."),
    submits: int = typer.Option(5000, min=1, help="Jobs submitted over HTTP."),
    concurrency: int = typer.Option(32, min=1, max=1024, help="Submissions in flight."),
    database_url: str = typer.Option(
        "", help="PostgreSQL URL to measure that backend instead of SQLite."
    ),
    seed: int = typer.Option(0, help="Seed of the job mix."),
    workers: int = typer.Option(
        None,
        min=1,
        max=64,
        help="The server's API worker processes [default: one per CPU core, at most 4]",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Start a server process on loopback, submit jobs from concurrent clients, and report
    submissions per second and submit-to-placed latency (server clock)."""
    import os

    from gpupool.bench.api import run_api_bench

    if workers is None:  # how a server is deployed for throughput: a worker per core
        workers = min(os.cpu_count() or 1, 4)

    result = run_api_bench(nodes, gpus_per_node, submits, concurrency, database_url, seed, workers)
    _emit(result, as_json, f"api benchmark ({result['backend']})")


@app.command("cycle")
@friendly
def cycle(
    nodes: int = typer.Option(1000, min=1, help="Servers in the synthetic cluster."),
    gpus_per_node: int = typer.Option(8, min=1, max=64, help="Cards per server."),
    pending: int = typer.Option(10000, min=1, help="Jobs waiting when the cycle starts."),
    tenants: int = typer.Option(100, min=1, help="Teams with equal guarantees."),
    seed: int = typer.Option(0, help="Seed of the cluster, tenants and job mix."),
    requests: str = typer.Option("synthetic", help=REQUESTS_HELP),
    defrag_moves: int = typer.Option(
        0, min=0, max=10000, help="Let defragmentation move this many jobs (server: 12/h)."
    ),
    server: bool = typer.Option(
        False,
        "--server",
        help="Time the server's own cycle (snapshot from the database, decide, fenced "
        "commit) on a filled database instead of the engine alone.",
    ),
    database_url: str = typer.Option(
        "", help="With --server: an empty PostgreSQL database (default: SQLite, temporary)."
    ),
    changes: int = typer.Option(
        300, min=2, help="With --server: changes before the steady cycle (ends + arrivals)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Time one full scheduling cycle (snapshot build, allocate, borrow, preempt, reclaim,
    defragment with --defrag-moves, backfill) over a large queue, with half the cluster
    already running work of a few heavy tenants. With --server: a new leader's first
    cycle and a steady one through the real server code and database."""
    if server:
        from gpupool.bench.server_cycle import run_server_cycle_bench

        if defrag_moves:
            raise typer.BadParameter("not with --server", param_hint="--defrag-moves")
        result = run_server_cycle_bench(
            nodes, gpus_per_node, pending, tenants, seed, requests, database_url, changes
        )
        _emit(result, as_json, f"server cycle benchmark ({result['backend']})")
        return
    if database_url:
        raise typer.BadParameter("only with --server", param_hint="--database-url")
    from gpupool.bench.cycle import run_cycle_bench

    result = run_cycle_bench(nodes, gpus_per_node, pending, tenants, seed, requests, defrag_moves)
    _emit(result, as_json, "scheduling cycle benchmark")


@app.command("simulate")
@friendly
def simulate(
    nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
    pods: Path = typer.Option(None, help=f"Pod list CSV (openb format) {DEFAULT_TRACE}"),
    policies: str = typer.Option(
        "random,dot-product,gpu-clustering,gpu-packing,paper-best-fit,fgd", help="Comma list."
    ),
    seeds: str = typer.Option("42-51", help="Seeds: N-M or a comma list."),
    tune: float = typer.Option(1.3, min=0.1, max=5.0, help="Workload x capacity."),
    workers: int = typer.Option(0, min=0, help="Processes (0: up to 2, one per core)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Time the FGD protocol replay of every policy x seed, spread over the cores."""
    from gpupool.bench.simulate import default_workers, run_simulate_bench
    from gpupool.sim.fgd_report import check_policies, parse_seeds

    nodes, pods = trace_files(nodes, pods)
    names = [p.strip() for p in policies.split(",") if p.strip()]
    check_policies(names)
    result = run_simulate_bench(
        nodes, pods, names, parse_seeds(seeds), tune, workers or default_workers()
    )
    _emit(result, as_json, "simulation benchmark")


@app.command("agents")
@friendly
def agents(
    nodes: int = typer.Option(1000, min=1, max=20000, help="Node identities the generator plays."),
    seconds: float = typer.Option(20.0, min=1, help="Idle seconds the server's CPU is measured."),
    submits: int = typer.Option(200, min=1, help="One-card jobs submitted after the idle part."),
    heartbeat_s: float = typer.Option(
        None,
        min=0.5,
        show_default=False,
        help="Seconds between each node's heartbeats [default: what the server advises]",
    ),
    database_url: str = typer.Option("", help="PostgreSQL URL instead of SQLite (a fresh one)."),
    workers: int = typer.Option(
        None, min=1, max=64, help="Server API workers [default: one per core, at most 4]"
    ),
    processes: int = typer.Option(
        0,
        min=0,
        max=64,
        show_default=False,
        help="Generator processes [default: 1 up to 200 nodes, else 2]",
    ),
    silent: int = typer.Option(
        10, min=0, help="Nodes that fall silent at the end: time until the server says lost."
    ),
    heartbeat_timeout_s: float = typer.Option(
        30.0, min=1, help="The server's lost-node timeout (its default: 30)."
    ),
    protocol: list[str] = typer.Option(
        ["poll", "long-poll", "channel"],
        help="How agents ask for orders: poll, long-poll, channel (repeatable).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """What N agents cost a real server: its CPU while they idle, submit→running under a
    burst and how long until silent nodes are declared lost, with orders polled every second
    (older agents), by long poll, and on the agents' channel (WebSocket), in one run."""
    import os

    require("aiohttp", "gpupool bench agents")
    from gpupool.bench.agents import run_agents_bench

    result = run_agents_bench(
        nodes, seconds, submits, heartbeat_s, database_url,
        workers=workers or min(os.cpu_count() or 1, 4),
        processes=processes or (1 if nodes <= 200 else 2),
        silent=min(silent, nodes), timeout_s=heartbeat_timeout_s, protocols=tuple(protocol),
    )  # fmt: skip
    _emit(result, as_json, "agents")


@app.command("kubernetes")
@friendly
def kubernetes(
    nodes: int = typer.Option(1000, min=1, help="Fake GPU nodes (8 A100 each) on the API server."),
    pods: int = typer.Option(5000, min=1, help="Pods created before each scheduler starts."),
    steady: int = typer.Option(1000, min=1, help="Pods created while it runs (latency)."),
    seed: int = typer.Option(0, help="Seed of the pods' card mix."),
    dra: bool = typer.Option(
        False, "--dra", help="Pods ask through ResourceClaims; each scheduler allocates them."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """gpupool's Kubernetes scheduler and the real kube-scheduler side by side on a throwaway
    kube-apiserver + etcd (scripts/k8s-control-plane.sh): same nodes, same pods (with --dra:
    the same ResourceSlices, and claims each allocates)."""
    require("kubernetes", "gpupool bench kubernetes")
    from gpupool.bench.kubernetes import BenchFailed, run_kubernetes_bench
    from gpupool.kube.control_plane import ENABLE, binaries_available

    if not binaries_available():
        raise SpecError(ENABLE)
    with stopped_cleanly_on_sigterm():
        try:
            result = run_kubernetes_bench(nodes, pods, steady, seed, dra)
        except BenchFailed as failed:
            if as_json:
                typer.echo(json.dumps(failed.as_dict()))
            typer.echo(f"error: {failed}", err=True)
            raise typer.Exit(1) from None
    _emit(result, as_json, "kubernetes benchmark")


@contextlib.contextmanager
def stopped_cleanly_on_sigterm() -> Iterator[None]:
    """SIGTERM (a timeout, a killed CI step) as SystemExit while a benchmark runs, so its
    ``finally`` stops the processes it started, as Ctrl-C does."""

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _emit(result: dict[str, Any], as_json: bool, title: str) -> None:
    """One JSON object for machines, or a table for people."""
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table("figure", "value", title=title)
    for key, value in result.items():
        table.add_row(key, str(value))
    Console().print(table)


@app.command("billing")
@friendly
def billing(
    scenario: str = typer.Option(
        "examples/seed-scenario.yaml", help="The scenario whose workloads shape the usage"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Invoice a 30-day month of hourly-metered usage shaped like a scenario's workloads, for
    a 40-card pool and for 1,000 cards, and report how long the invoices took."""
    from gpupool.bench.billing import run_billing_bench

    _emit(run_billing_bench(scenario), as_json, "billing benchmark")
