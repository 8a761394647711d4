"""``gpupool simulate ...``: replay traces through the scheduling engine."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from gpupool.cli import (
    simulate_advisory,
    simulate_autoscale,
    simulate_estimates,
    simulate_fairness,
    simulate_topology,
)
from gpupool.cli.errors import err_console, friendly
from gpupool.cli.trace_args import DEFAULT_TRACE, require_files, trace_files, trace_paths
from gpupool.model import SpecError
from gpupool.scheduler.lookahead import DEPTH
from gpupool.sim.fgd_protocol import FUTURES

app = typer.Typer(help="Replay cluster traces through the same engine the server runs.")
simulate_autoscale.register(app)
simulate_topology.register(app)
simulate_advisory.register(app)
simulate_estimates.register(app)
simulate_fairness.register(app)


@app.command("fgd")
@friendly
def fgd(
    nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
    pods: Path = typer.Option(None, help=f"Pod list CSV (openb format) {DEFAULT_TRACE}"),
    policies: str = typer.Option(
        "paper-best-fit,fgd", help="Comma list of policies (see gpupool policies)."
    ),
    seeds: str = typer.Option("42-51", help="Seeds: N-M or a comma list."),
    tune: float = typer.Option(1.3, min=0.1, max=5.0, help="Workload as a multiple of capacity."),
    strict: bool = typer.Option(False, help="Reject the trace on any bad row."),
    report: Path | None = typer.Option(None, help="Write a self-contained HTML report here."),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write the curves as CSV here."),
    depth: int = typer.Option(
        DEPTH, "--lookahead-depth", min=1, max=64, help="fgd-lookahead: requests per future"
    ),
    futures: int = typer.Option(
        FUTURES, "--lookahead-futures", min=1, max=64, help="fgd-lookahead: sampled futures"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The FGD paper's protocol (ATC'23): shuffled bag of pods topped up to TUNE x capacity,
    each scheduled once; medians over seeds of unallocated GPUs, allocation and
    fragmentation against arrived workload. What each policy does, and which are online
    (decide only from pods already arrived): gpupool policies."""
    from gpupool.sim.fgd_report import check_policies, parse_seeds, run_fgd_protocol
    from gpupool.sim.report import fgd_curves_csv, fgd_report_html

    names = _names(policies)
    check_policies(names)
    seed_list = parse_seeds(seeds)
    node_list, pod_list = _load_trace(nodes, pods, strict)
    if as_json:
        result = run_fgd_protocol(node_list, pod_list, names, seed_list, tune, None, depth, futures)
    else:
        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("replaying", total=len(names) * len(seed_list))
            result = run_fgd_protocol(
                node_list,
                pod_list,
                names,
                seed_list,
                tune,
                lambda: bar.advance(task),
                depth,
                futures,
            )
    _outputs(result, report, csv_out, fgd_report_html, fgd_curves_csv)
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(
        "policy",
        "unallocated GPUs at 100%",
        "alloc at 100%",
        "alloc at end",
        "arrived at end",
        "frag at 100%",
        "failed pods",
        title=f"FGD protocol, {result['gpus']} GPUs, seeds {seeds}, tune {tune}",
        caption="the bag is trimmed or topped up to at most tune x capacity (the paper's "
        "protocol); 'at end' is where it ends",
    )
    for name, row in result["policies"].items():
        table.add_row(
            name,
            f"{row['unallocated_gpus_at_100']:.1f}",
            f"{row['alloc_ratio_at_100']:.3f}",
            f"{row['alloc_ratio_at_130']:.3f}",
            f"{row['arrived_at_end']:.3f}",
            f"{row['frag_amount_at_100']:.3f}",
            str(row["failed_pods"]),
        )
    Console().print(table)


@app.command("family")
@friendly
def family(
    folder: Path = typer.Option(
        None, "--dir", help=f"Folder of openb_pod_list_*.csv files {DEFAULT_TRACE}"
    ),
    nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
    policies: str = typer.Option(
        "random,dot-product,gpu-clustering,gpu-packing,paper-best-fit,fgd", help="Comma list."
    ),
    seeds: str = typer.Option("42-51", help="Seeds: N-M or a comma list."),
    tune: float = typer.Option(1.3, min=0.1, max=5.0, help="Workload as a multiple of capacity."),
    strict: bool = typer.Option(False, help="Reject a file on any bad row."),
    workers: int = typer.Option(0, min=0, max=64, help="Replay processes [default: 2 or cores]"),
    depth: int = typer.Option(
        DEPTH, "--lookahead-depth", min=1, max=64, help="fgd-lookahead: requests per future"
    ),
    futures: int = typer.Option(
        FUTURES, "--lookahead-futures", min=1, max=64, help="fgd-lookahead: sampled futures"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The FGD protocol on every pod list of a trace family (the openb variants: sharing-,
    multi-GPU-, GPU-type- and CPU-heavy mixes): unallocated GPUs at 100% and 130% arrived per
    policy and file, whether fgd beats every baseline, and — where the folder holds the
    paper's published-results.csv — each policy against the paper's FGD (within +5%: ok).
    A file that cannot be read is an error row. Policies: gpupool policies."""
    from gpupool.bench.simulate import default_workers
    from gpupool.sim.fgd_report import check_policies, parse_seeds
    from gpupool.sim.published import FILE, parse_published
    from gpupool.sim.trace_family import compare_family, family_files, trace_name
    from gpupool.sim.traces.openb import load_nodes, load_pods

    names = _names(policies)
    check_policies(names)
    seed_list = parse_seeds(seeds)
    if folder is None:  # the default trace's folder (and its node list unless given)
        node_path, default_pods = trace_paths(nodes, None)
        folder = default_pods.parent
    else:
        node_path, _ = trace_paths(nodes, folder)  # the folder stands in for a pod list
    files = family_files(folder)
    require_files(node_path)
    node_list, node_errors = load_nodes(node_path, strict=strict)
    skipped = [str(e) for e in node_errors]
    unreadable: dict[str, str] = {}
    counts: dict[str, int] = {}
    for path in files:
        try:
            pods, more = load_pods(path, strict=strict)
        except (SpecError, OSError, UnicodeDecodeError) as exc:
            unreadable[trace_name(path)] = str(exc)
            continue
        counts[trace_name(path)] = len(pods)
        skipped = [*skipped, *(f"{path.name}: {e}" for e in more)]
    for e in skipped[:20]:
        err_console.print(f"skipped {e}")
    published = None
    if (folder / FILE).is_file():
        published = parse_published((folder / FILE).read_text(), FILE)
    total = len(counts) * len(names) * len(seed_list)
    with Progress(console=err_console, transient=True, disable=as_json) as bar:
        task = bar.add_task("replaying", total=total)
        result = compare_family(
            node_path,
            files,
            names,
            seed_list,
            tune,
            gpus=sum(len(n.devices) for n in node_list),
            pod_counts=counts,
            errors=unreadable,
            published=published,
            workers=workers or default_workers(),
            progress=lambda: bar.advance(task),
            depth=depth,
            futures=futures,
        )
    if as_json:
        typer.echo(json.dumps(result))
        return
    _family_table(result, names)


def _family_table(result: dict, names: list[str]) -> None:
    paper = result["fgd_within_5pct_of_paper_everywhere"] is not None
    columns = ["file", *names, "fgd beats baselines"]
    if paper:
        columns += ["paper FGD", "fgd vs paper"]
    table = Table(*columns, title="FGD protocol: unallocated GPUs at 100% arrived (median)")
    for name, row in result["files"].items():
        if "error" in row:
            table.add_row(name, f"[red]cannot read: {row['error']}[/red]")
            continue
        unallocated = row["unallocated_gpus_at_100"]
        cells = [name, *(f"{unallocated[p]:.1f}" for p in names)]
        cells.append({True: "yes", False: "NO", None: "-"}[row["fgd_beats_baselines"]])
        if paper:
            versus = row.get("versus_paper_fgd", {}).get("fgd")
            fgd_paper = row.get("paper", {}).get("fgd", {}).get("at_100")
            cells.append(f"{fgd_paper:.1f}" if fgd_paper is not None else "-")
            cells.append(
                f"{versus['relative']['at_100']:+.1%} / {versus['relative']['at_130']:+.1%}"
                + ("" if versus["within_tolerance"] else " [red]over 5%[/red]")
                if versus
                else "-"
            )
        table.add_row(*cells)
    ends = [
        f"{name} {row['arrived_at_end']:.2f}"
        for name, row in result["files"].items()
        if row.get("arrived_at_end") is not None
    ]
    table.caption = "arrived at the end of each bag (x capacity, at most tune): " + ", ".join(ends)
    Console().print(table)


@app.command("variants")
@friendly
def variants(
    out: Path = typer.Option(..., help="Folder to write openb_pod_list_<variant>.csv files into."),
    nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
    pods: Path = typer.Option(None, help=f"Pod list CSV to vary {DEFAULT_TRACE}"),
    seed: int = typer.Option(0, help="Seed of the sampling."),
    strict: bool = typer.Option(False, help="Reject the trace on any bad row."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Make GPU-sharing-, multi-GPU-, CPU- and GPU-type-heavy variants of a pod list (the
    kinds the openb trace ships), for gpupool simulate family --dir OUT. They are sampled here, not
    the published files: compare policies on them, not figures with the paper's."""
    import csv

    from gpupool.sim.traces.openb import load_nodes, load_pod_rows
    from gpupool.sim.traces.variants import STANDARD, make_variant, mix

    node_path, pod_path = trace_files(nodes, pods)
    node_list, node_errors = load_nodes(node_path, strict=strict)
    rows, pod_errors = load_pod_rows(pod_path, strict=strict)
    for e in [*node_errors, *pod_errors][:20]:
        err_console.print(f"skipped {e}")
    if not rows:
        raise SpecError(f"{pod_path.name}: no valid pod rows to vary")
    header = list(rows[0])  # the file's columns, in its order
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"source": mix(rows)}
    for variant in STANDARD:
        made = make_variant(rows, variant, node_list, seed)
        target = out / f"openb_pod_list_{variant.name}.csv"
        with target.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, header, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(made)
        result[variant.name] = {"file": str(target), **mix(made)}
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table("list", "pods", "share of GPU pods", "multi-card GPU", "CPU-only", "typed GPU")
    for name, m in result.items():
        table.add_row(
            name,
            str(m["pods"]),
            *(f"{m[k]:.0%}" for k in ("gpushare", "multigpu", "cpu", "gpuspec")),
        )
    Console().print(table)


@app.command("openb-time")
@friendly
def openb_time(
    nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
    pods: Path = typer.Option(
        None, help=f"Pod list CSV with creation/deletion/scheduled times {DEFAULT_TRACE}"
    ),
    policies: str = typer.Option("fgd,best-fit", help="Comma list of engine policies."),
    node_fraction: float = typer.Option(
        1.0, help="Replay on this share of the nodes (same model mix, seeded)."
    ),
    time_scale: float = typer.Option(
        1.0, min=0.001, max=1e6, help="Compress the arrivals by this factor (busier cluster)."
    ),
    strict: bool = typer.Option(False, help="Reject the trace on any bad row."),
    report: Path | None = typer.Option(None, help="Write a self-contained HTML report here."),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write the time series as CSV."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Replay the openb pods in time (arrive at creation, run as long as they ran, FIFO queue
    with backfill): allocation ratio and useful utilisation over time, queue delays —
    fractional GPU shares against whole cards, per policy."""
    from gpupool.scheduler.placer import POLICY_NAMES
    from gpupool.sim.openb_time import compare_in_time, sample_nodes
    from gpupool.sim.report import openb_time_csv, openb_time_report_html

    names = _names(policies)
    for name in names:
        if name not in POLICY_NAMES:
            raise SpecError(f"policy: {name!r} is not one of {', '.join(POLICY_NAMES)}")
    node_list, pod_list = _load_trace(nodes, pods, strict)
    node_list = sample_nodes(node_list, node_fraction)
    result = compare_in_time(node_list, pod_list, names, time_scale=time_scale)
    _outputs(result, report, csv_out, openb_time_report_html, openb_time_csv)
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(
        "policy",
        "mode",
        "started",
        "never started",
        "alloc (mean)",
        "useful (mean)",
        "alloc while queued",
        "useful while queued",
        "p95 wait",
        title=f"openb in time: {result['gpus']} GPUs, {result['pods']} pods, "
        f"arrivals x{time_scale:g}",
    )
    for name, modes in result["policies"].items():
        for mode, r in modes.items():
            table.add_row(
                name,
                mode,
                str(r["started"]),
                str(r["never_started"]),
                f"{r['alloc_ratio_mean']:.1%}",
                f"{r['useful_util_mean']:.1%}",
                _ratio(r["alloc_ratio_while_queued"]),
                _ratio(r["useful_util_while_queued"]),
                _hours(r["queue_delay_p95_s"]),
            )
    Console().print(table)


@app.command("defrag")
@friendly
def defrag_command(
    nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
    pods: Path = typer.Option(None, help=f"Pod list CSV (openb format) {DEFAULT_TRACE}"),
    seed: int = typer.Option(42, help="Seed of the shuffled bag (the FGD protocol's)."),
    arrived: float = typer.Option(0.9, min=0.05, max=1.5, help="Arrived load x capacity."),
    policy: str = typer.Option("fgd", help="Placement policy that fills the pool."),
    max_moves: int = typer.Option(4, min=1, max=64, help="Moves per placed job (server: 4)."),
    scenario: Path | None = typer.Option(
        None, help="Instead: replay this team scenario pooled, without and with moves."
    ),
    checkpoint_s: float = typer.Option(
        1800.0, min=0, help="--scenario: work a move may cost a job, s (server's default)."
    ),
    strict: bool = typer.Option(False, help="Reject the trace on any bad row."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Defragmentation on the openb trace: fill the pool online to ARRIVED x its GPUs, then
    count how many 8-GPU and 4-GPU jobs fit one after another — as the pool is, and letting
    the scheduler's planner move pods (each to free capacity elsewhere) to make room; with
    the moves and pods interrupted it cost. Every pod counts as movable: an upper bound.
    With --scenario: each team's queue delays in the pooled replay without and with
    defragmentation (the server's limits: 12 moves an hour, after 5 minutes of waiting, a
    move costing a job at most --checkpoint-s of work)."""
    from gpupool.scheduler.placer import POLICY_NAMES
    from gpupool.sim.defrag_sim import defrag_report

    if scenario is not None:
        _scenario_defrag(scenario, as_json, checkpoint_s)
        return

    if policy not in POLICY_NAMES:
        raise SpecError(f"policy: {policy!r} is not one of {', '.join(POLICY_NAMES)}")
    node_list, pod_list = _load_trace(nodes, pods, strict)
    result = defrag_report(
        node_list, pod_list, seed=seed, arrived=arrived, policy=policy, max_moves=max_moves
    )
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(
        "job",
        "placeable as is",
        "placeable with moves",
        "moves",
        "pods interrupted",
        title=f"defragmentation at {arrived:.0%} arrived: {result['gpus']} GPUs, seed {seed}",
    )
    for k in ("8", "4"):
        cost = result["by_probe"][f"{k}gpu"]
        table.add_row(
            f"{k} GPUs",
            str(result["before"][f"placeable_{k}gpu"]),
            str(result["after"][f"placeable_{k}gpu"]),
            str(cost["moves"]),
            str(cost["jobs_interrupted"]),
        )
    Console().print(table)


def _scenario_defrag(path: Path, as_json: bool, checkpoint_s: float) -> None:
    from gpupool.sim.scenario import load_scenario
    from gpupool.sim.team_replay import defrag_waits

    result = defrag_waits(load_scenario(path), checkpoint_s=checkpoint_s)
    if as_json:
        typer.echo(json.dumps({k: v for k, v in result.items()}, default=str))
        return
    table = Table(
        "team", "p95 wait without", "p95 wait with", "started without", "started with",
        title=f"{result['scenario']}: pooled, without and with defragmentation",
    )  # fmt: skip
    without, with_ = result["without"]["tenants"], result["with"]["tenants"]
    for team in without:
        table.add_row(
            team,
            _hours(without[team]["queue_delay_p95_s"]),
            _hours(with_[team]["queue_delay_p95_s"]),
            str(without[team]["started"]),
            str(with_[team]["started"]),
        )
    Console().print(table)
    moves = result["with"]["preemptions"] - result["without"]["preemptions"]
    typer.echo(f"jobs moved (extra preemptions): {moves}")
    typer.echo(
        f"inference replicas copied first (make-before-break): {result['with']['replicas_copied']}"
    )


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


@app.command("roi")
@friendly
def roi_command(
    cards: int = typer.Option(..., help="Cards in the pool today."),
    model: str = typer.Option("A100-80G", help="Card model (prices from the catalog)."),
    util_before: float = typer.Option(..., help="Utilisation without pooling, 0-1."),
    util_after: float = typer.Option(..., help="Utilisation with pooling, 0-1."),
    platform_cost: float = typer.Option(..., help="One-off platform cost in CNY."),
    headroom: float = typer.Option(0.0, help="Capacity kept free for virtualisation, 0-1."),
    price: float = typer.Option(0.0, help="Card-month price in CNY (0: the catalog's)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Cards freed by pooling the same work, the monthly saving and the payback time."""
    from gpupool.billing.catalog import FEN_PER_CNY, monthly_price_fen
    from gpupool.sim.roi import roi

    price_fen = round(price * FEN_PER_CNY) if price else monthly_price_fen(model)
    result = roi(
        cards, util_before, util_after, price_fen, round(platform_cost * FEN_PER_CNY), headroom
    )
    if as_json:
        typer.echo(json.dumps(result.as_dict()))
        return
    out = Table("step", "value", title=f"ROI of pooling {cards} x {model}")
    out.add_row(
        "busy card-equivalents", f"{cards} x {util_before:g} = {result.busy_card_equivalents:g}"
    )
    out.add_row(
        "cards needed",
        f"ceil({result.busy_card_equivalents:g} / ({util_after:g} x (1 - {headroom:g})))"
        f" = {result.cards_needed}",
    )
    out.add_row("cards freed", str(result.cards_freed))
    out.add_row(
        "monthly saving",
        f"{result.cards_freed} x ¥{result.price_per_card_month:,.0f}"
        f" = ¥{result.monthly_saving:,.0f}",
    )
    payback = "never" if result.payback_months is None else f"{result.payback_months:g} months"
    out.add_row("payback", f"¥{result.platform_cost:,.0f} / saving = {payback}")
    Console().print(out)


@app.command("scenario")
@friendly
def scenario_command(
    file: Path = typer.Argument(..., help="Scenario YAML (see examples/seed-scenario.yaml)."),
    report: Path | None = typer.Option(None, help="Write a self-contained HTML report here."),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write cards in use over time."),
    victim_order: str = typer.Option(
        None,
        help="Victims of one priority: work (least work lost) or age (fewest seconds since "
        "their last checkpoint) [default: the file's victim_order, else work]",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Replay a team scenario three times on the same jobs and compare utilisation and queue
    delays per team: static_partition (each team on servers of its own, as split by hand),
    static_quota (per-team caps on one shared pool) and pooled (borrowing idle cards)."""
    from gpupool.scheduler.session import VICTIM_ORDERS
    from gpupool.sim.report import scenario_csv, scenario_report_html
    from gpupool.sim.scenario import load_scenario
    from gpupool.sim.team_replay import MODES, compare

    scenario = load_scenario(file)
    if victim_order is not None:
        if victim_order not in VICTIM_ORDERS:
            raise SpecError(
                f"victim-order: {victim_order!r} is not one of {', '.join(VICTIM_ORDERS)}",
                field="victim_order",
            )
        scenario = scenario.model_copy(update={"victim_order": victim_order})
    result = compare(scenario)
    _outputs(result, report, csv_out, scenario_report_html, scenario_csv)
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(
        "mode",
        "team",
        "jobs",
        "started",
        "p50 wait",
        "p95 wait",
        title=f"{result['scenario']}: {result['cards']} cards, {result['jobs']} jobs",
    )
    for mode in MODES:
        row = result[mode]
        table.add_row(mode, "all", "", "", "", _hours(row["queue_delay_p95_s"]), end_section=False)
        for team, t in row["tenants"].items():
            table.add_row(
                "",
                team,
                str(t["jobs"]),
                str(t["started"]),
                _hours(t["queue_delay_p50_s"]),
                _hours(t["queue_delay_p95_s"]),
            )
        table.add_row(
            "", "utilisation", f"{row['gpu_utilization']:.1%}", "", "", "", end_section=True
        )
    Console().print(table)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.1f} h"


@app.command("plan")
@friendly
def plan_command(
    file: Path = typer.Argument(..., help="Scenario YAML; its first server group is resized."),
    target_minutes: float = typer.Option(10.0, help="p95 queue delay every team must meet."),
    max_servers: int = typer.Option(0, min=0, help="Search limit (0: twice the scenario's)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The smallest pool (servers of the first group) whose replay meets the p95 queue-delay
    target for every team, with a static partition (servers of each team's own) and with
    pooling."""
    from gpupool.sim.plan import PLAN_MODES, plan
    from gpupool.sim.scenario import load_scenario

    result = plan(load_scenario(file), target_minutes * 60, max_servers or None)
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(
        "mode",
        "servers",
        "cards",
        "utilisation",
        title=f"{result['scenario']}: p95 wait <= {target_minutes:g} min for every team",
    )
    for mode in PLAN_MODES:
        row = result[mode]
        util = row.get("gpu_utilization")
        table.add_row(
            mode,
            str(row["servers"] or row.get("note")),
            str(row["cards"] or "-"),
            "-" if util is None else f"{util:.1%}",
        )
    Console().print(table)


def _names(policies: str) -> list[str]:
    return [p.strip() for p in policies.split(",") if p.strip()]


def _load_trace(nodes: Path | None, pods: Path | None, strict: bool) -> tuple[list, list]:
    """The openb node and pod lists; bad rows are skipped and shown (or refused, ``strict``)."""
    from gpupool.sim.traces.openb import load_nodes, load_pods

    nodes, pods = trace_files(nodes, pods)
    node_list, node_errors = load_nodes(nodes, strict=strict)
    pod_list, pod_errors = load_pods(pods, strict=strict)
    for e in [*node_errors, *pod_errors][:20]:
        err_console.print(f"skipped {e}")
    return node_list, pod_list


def _outputs(
    result: dict,
    report: Path | None,
    csv_out: Path | None,
    html: Callable[[dict], str],
    csv: Callable[[dict], str],
) -> None:
    from gpupool.sim.report import write

    if report is not None:
        write(report, html(result))
        err_console.print(f"report written to {report}")
    if csv_out is not None:
        write(csv_out, csv(result))
