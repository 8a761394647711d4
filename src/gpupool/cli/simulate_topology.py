"""``gpupool simulate topology``: gangs on a two-level fat tree, topology-blind against
``prefer-leaf`` and required ``leaf``."""

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli.errors import err_console, friendly
from gpupool.cli.trace_args import DEFAULT_TRACE, require_files, seed_list, trace_files


def _cell(value: float | None, fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def register(app: typer.Typer) -> None:
    @app.command("topology")
    @friendly
    def topology_command(
        leaves: int = typer.Option(4, min=1, max=256, help="Leaf switches."),
        nodes_per_leaf: int = typer.Option(16, min=1, max=1024, help="Servers under a leaf."),
        cards: int = typer.Option(8, min=1, max=16, help="GPUs per server."),
        jobs: int = typer.Option(150, min=1, max=100_000, help="Gangs per seed."),
        load: float = typer.Option(0.6, min=0.01, max=5, help="Load the gangs offer."),
        seeds: str = typer.Option("1,2,3,4,5", help="Comma-separated seeds of the gang mix."),
        background: float = typer.Option(
            0.0, min=0, max=5, help="Load of a background of an openb pod list's timed GPU pods."
        ),
        pods: Path = typer.Option(None, help=f"Pod list for the background {DEFAULT_TRACE}"),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Gangs of 8-128 GPUs on a fat tree (leaves under one spine), placed blind, with
        topology=prefer-leaf, and with topology=leaf required for gangs a leaf can hold: how
        long gangs wait and what share of their GPU pairs talk through the spine. Medians
        over seeds; every mode sees the same arrivals."""
        from gpupool.sim.topology_sim import Tree, compare
        from gpupool.sim.traces.openb import Pod, load_pods

        tree = Tree(leaves, nodes_per_leaf, cards)
        pod_list: list[Pod] = []
        if background > 0:
            if pods is None:
                _, pods = trace_files(None, None)
            require_files(pods)
            pod_list, errors = load_pods(pods)
            for e in errors[:20]:
                err_console.print(f"skipped {e}")
        result = compare(tree, seed_list(seeds), jobs, load, pod_list, background)
        if as_json:
            typer.echo(json.dumps(result))
            return
        table = Table(
            "placement", "cross-spine", "gangs > 1 leaf", "wait p95", "≥64 GPUs p95",
            title=f"{tree.capacity} GPUs, {leaves} leaves; wait in minutes",
        )  # fmt: skip
        for mode, m in result["median"].items():
            table.add_row(
                mode,
                _cell(m["cross_spine_share"], "{:.1%}"),
                _cell(m["gangs_over_leaves"], "{:.0f}"),
                _cell(m["wait_p95_min"]),
                _cell(m["big_wait_p95_min"]),
            )
        Console().print(table)
