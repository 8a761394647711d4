"""``gpupool simulate autoscale``: reactive against predictive scaling on a ServeGen trace."""

import json
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Column, Table

from gpupool.cli.errors import err_console, friendly
from gpupool.extras import MissingExtra, have
from gpupool.model import SpecError


def _trace_dir(trace: Path | None, model: str) -> Path:
    from gpupool.sim.traces.servegen import ENV

    if trace is not None:
        return trace
    if os.environ.get(ENV):
        return Path(os.environ[ENV]) / model
    raise SpecError(
        f"trace: give --trace DIR (a folder of ServeGen *-trace.csv client files) or set {ENV} "
        "to ServeGen's data/language folder",
        field="trace",
    )


def _count(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:.0f}"


def _row(name: str, point: dict | None) -> list[str]:
    if point is None:
        return [name, "-", "-", "-", "-", "-", "-", "-"]
    return [
        name,
        f"{point['headroom']:.2f}",
        f"{point['replica_hours']:,.0f}",
        f"{point['underprovisioned_min']:,.0f}",
        f"{point['slo_violating_min']:,.0f}",
        _count(point["unserved_requests"]),
        f"{point['wait_p95_s']:.1f}",
        f"{point['training_gpu_hours']:,.0f}",
    ]


def autoscale_command(
    trace: Path | None = typer.Option(
        None, help="Folder of ServeGen *-trace.csv client files (default: $GPUPOOL_SERVEGEN_DIR)."
    ),
    model: str = typer.Option(
        "m-large", help="Without --trace: the model folder under $GPUPOOL_SERVEGEN_DIR."
    ),
    scenario: Path | None = typer.Option(
        None, help="Scenario YAML (default: examples/autoscale-scenario.yaml's values)."
    ),
    strict: bool = typer.Option(False, help="Reject the trace on any bad row."),
    arrivals: str = typer.Option(
        None,
        help="smooth (each window's mean rate) or bursty (each 10-s tick drawn from the "
        "window's rate and inter-arrival CV) [default: the scenario's, smooth].",
    ),
    seed: int = typer.Option(None, min=0, help="Seed of the bursty draws [default: 0]."),
    harvest_only: bool = typer.Option(
        False,
        "--harvest-only",
        help="Only Harvest@99 and its out-of-sample headline (half the time: the "
        "reactive/predictive curves are left out).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Learn days 1-7 of a request-rate trace, replay days 8-14 with a Knative-KPA-like
    reactive autoscaler and the predictive one, each swept over its headroom, and compare them
    at equal replica-hours (the reactive front point costing the same or more). Then
    Harvest@99: the training GPU-hours a week left beside the service with at most 1% of
    minutes violating its SLO, for the anchors (KPA at 480 s and 90 s leads, constant and
    seasonal forecasts), gpupool's warm path (parked engines, fast vacate, SLO feedback) and
    a clairvoyant ceiling; the headline is each one's setting chosen on days 2-7, judged on
    days 8-14."""
    from gpupool.autoscale.compare import compare
    from gpupool.autoscale.compare import harvest_only as only_harvest
    from gpupool.autoscale.scenario import AutoscaleScenario, load_scenario, scenario_with
    from gpupool.sim.traces.servegen import load_rates

    folder = _trace_dir(trace, model)
    if not have("statsmodels"):
        missing = MissingExtra("statsmodels", "the ARIMA forecaster")
        err_console.print(f"[yellow]warning:[/] ARIMA left out of the comparison: {missing}")
    chosen = load_scenario(scenario) if scenario else AutoscaleScenario()
    rates, skipped = load_rates(folder, strict=strict)
    for line in skipped[:5]:
        err_console.print(f"[yellow]skipped[/] {line}")
    if len(skipped) > 5:
        err_console.print(f"[yellow]skipped[/] {len(skipped) - 5} more rows")
    if arrivals is not None or seed is not None:  # validated as the scenario file's would be
        given = {"arrivals": arrivals, "seed": seed}
        chosen = scenario_with(chosen, {k: v for k, v in given.items() if v is not None})
    run = only_harvest if harvest_only else compare
    result = run(rates.total, rates.window_s, chosen, rates.burst_cv2)
    result["trace"] = {"folder": str(folder), "clients": len(rates.clients)}
    result["skipped_rows"] = len(skipped)
    if as_json:
        typer.echo(json.dumps(result))
        return
    console = Console()
    if harvest_only:
        console.print(harvest_table(result["harvest"]))
        for line in harvest_verdict(result["harvest"]):
            console.print(line)
        return
    table = Table(
        Column("policy", no_wrap=True),
        Column("head-\nroom", justify="right"),
        Column("replica\nh", justify="right"),
        Column("short\nmin", justify="right"),
        Column("SLO\nmin", justify="right"),
        Column("un-\nserved", justify="right"),
        Column("p95\ns", justify="right"),
        Column("train\nGPU-h", justify="right"),
        title=f"{result['judged_days']:g} judged days, lead {result['lead_s']:.0f} s",
        caption="short min: minutes with ready capacity below demand; SLO min: minutes with "
        "over 1% of requests dropped or waiting over 2 s; p95 s: request wait; "
        "reactive: the Knative-KPA-like front point at the same or more replica-hours",
    )
    table.add_row(*_row("predictive", result["predictive"]))
    table.add_row(*_row("reactive", result["reactive"]))
    for name, pair in result["predictors"].items():
        if name != "seasonal-quantile":
            table.add_row(*_row(name, pair["predictive"]))
    console.print(table)
    ratio = result["underprovisioned_ratio"]
    if ratio is not None:
        typer.echo(f"predictive has {ratio:.2f}x the reactive short minutes at equal cost")
    console.print(harvest_table(result["harvest"]))
    for line in harvest_verdict(result["harvest"]):
        console.print(line)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def harvest_table(h: dict) -> Table:
    """Per contender: the out-of-sample headline, its front's Harvest@99 beside it (80
    columns)."""
    table = Table(
        Column("contender", no_wrap=True),
        Column("lead\ns", justify="right"),
        Column("learned\nGPU-h", justify="right"),
        Column("learned\nSLO min", justify="right"),
        Column("front\nH@99", justify="right"),
        Column("gang\nH@99", justify="right"),
        Column("SLO min\nbudget", justify="right"),
        title=f"Harvest@{100 - 100 * h['slo_target_minutes_fraction']:g} (a week), out of sample",
        caption="learned: the setting with the most harvest within the target on days 2-7, "
        f"judged on days 8-14 (SLO min allowed: {h['slo_limit_min']:,.0f}); front H@99: "
        "training GPU-h a week (net of lost work) at the best setting on days 8-14 "
        f"themselves; gang: in {h['gang_cards']}-card jobs; budget: SLO min at "
        f"{h['budget_replica_hours']:,.0f} replica-h",
    )
    for name, r in h["contenders"].items():
        lead = f"{r['cold_lead_s']:.0f}"
        if r["warm_lead_s"] is not None:
            lead = f"{r['warm_lead_s']:.0f}/{lead}"
        head = h["headline"][name]
        table.add_row(
            name,
            lead,
            _num(head["harvest_gpu_hours_week"]),
            _num(head["slo_violating_min"]) + ("" if head["met_slo"] else "!"),
            _num(r["harvest_at_99"]),
            _num(r["harvest_gang_at_99"]),
            _num(r["slo_violating_min_at_budget"]),
        )
    return table


def harvest_verdict(h: dict) -> list[str]:
    """The goals of issues 49 and 66, said plainly."""
    warm = h["headline"]["gpupool-warm"]
    best = h["best_anchor"]
    front = None if best is None else h["contenders"][best]["harvest_at_99"]
    lines = [
        f"Out of sample: gpupool-warm's learned setting violates {warm['slo_violating_min']:,.0f}"
        f" SLO min on days 8-14 (allowed {h['slo_limit_min']:,.0f}) and harvests "
        f"{warm['harvest_gpu_hours_week']:,.0f} GPU-h, against the best anchor's front "
        f"H@99 {_num(front)} (goal {'met' if h['learned_goal_met'] else 'not met'})"
    ]
    if h["gap_closed"] is None:
        lines.append("Harvest@99: no anchor meets the SLO target, so no gap to close")
    else:
        lines.append(
            f"Harvest@99 (fronts): gpupool-warm closes {100 * h['gap_closed']:.0f}% of the gap "
            f"from {best} to the clairvoyant ceiling (goal: a third)"
        )
    ours = h["contenders"]["gpupool-warm"]["slo_violating_min_at_budget"]
    best_slo = h["best_anchor_slo_at_budget"]
    if ours is not None and best_slo:
        lines.append(
            f"SLO-violating minutes at the budget: {ours:,.0f} against the best anchor's "
            f"{best_slo:,.0f} ({ours / best_slo:.2f}x; goal: at most 0.5x)"
        )
    return lines


def register(app: typer.Typer) -> None:
    app.command("autoscale")(friendly(autoscale_command))
