"""``gpupool simulate estimates``: start-time estimates at submission on the openb trace in
time, gpupool's (run-time model) against Slurm's method (time limits), held out."""

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli.errors import err_console, friendly
from gpupool.cli.trace_args import DEFAULT_TRACE, seed_list, trace_files
from gpupool.model import SpecError


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def register(app: typer.Typer) -> None:
    @app.command("estimates")
    @friendly
    def estimates_command(
        nodes: Path = typer.Option(None, help=f"Node list CSV (openb format) {DEFAULT_TRACE}"),
        pods: Path = typer.Option(None, help=f"Pod list CSV with times {DEFAULT_TRACE}"),
        seeds: str = typer.Option("1", help="Node samples to replay on (at 1%: one cluster)."),
        node_fraction: float = typer.Option(0.01, min=0.001, max=1.0, help="Share of nodes."),
        time_scale: float = typer.Option(4.0, min=0.01, max=1000, help="Arrivals x this."),
        from_day: float = typer.Option(132.0, min=0, help="Score pods created from this day."),
        until_day: float = typer.Option(147.0, min=0, help="... and before this day."),
        every: int = typer.Option(1, min=1, max=1000, help="Estimate every n-th pod only."),
        quantile: float = typer.Option(0.25, min=0.01, max=0.99, help="Run-time quantile."),
        by_limit: bool = typer.Option(True, help="Similar jobs with the same limit first."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Estimate each pod's start at its submission (the real cycle run forward) with
        gpupool's run-time model and with Slurm's method (every job runs to its limit: its run
        time rounded up to the hour); compare with the start it got in the same replay:
        absolute error / actual wait, median and p90, for short (< 1 h) and long waits."""
        from gpupool.scheduler.runtime_model import RuntimeModel
        from gpupool.sim.estimate_replay import held_out
        from gpupool.sim.traces.openb import load_nodes, load_pods

        if until_day <= from_day:
            raise SpecError("until-day must be after from-day")
        node_path, pod_path = trace_files(nodes, pods)
        node_list, node_errors = load_nodes(node_path)
        pod_list, pod_errors = load_pods(pod_path)
        for e in (node_errors + pod_errors)[:20]:
            err_console.print(f"skipped {e}")
        result = held_out(
            node_list,
            pod_list,
            seeds=seed_list(seeds),
            node_fraction=node_fraction,
            time_scale=time_scale,
            days=(from_day, until_day),
            model=RuntimeModel(quantile=quantile, by_limit=by_limit),
            every=every,
        )
        if as_json:
            typer.echo(json.dumps(result))
            return
        pooled = result["pooled"]
        table = Table(
            "waits", "jobs", "p50 wait (min)", "method", "median |err|/wait", "p90 |err|/wait",
            "median |err| (min)",
            title=f"start estimates at submission: {pooled['estimated']} pods estimated, "
            f"{pooled['waited']} waited (seeds {seeds}, days {from_day:g}-{until_day:g})",
        )  # fmt: skip
        for group in ("all", "short", "long"):
            g = pooled[group]
            for method in ("gpupool", "slurm"):
                e = g[method]
                wait = g["wait_p50_s"]
                abs_s = e["median_abs_error_s"]
                table.add_row(
                    group,
                    str(g["jobs"]),
                    _cell(None if wait is None else wait / 60, "{:,.1f}"),
                    method,
                    _cell(e["median_rel_error"], "{:.2f}"),
                    _cell(e["p90_rel_error"], "{:.2f}"),
                    _cell(None if abs_s is None else abs_s / 60, "{:,.1f}"),
                )
        Console().print(table)
