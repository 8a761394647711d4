"""``gpupool simulate advisory``: what advisory mode costs on a team scenario, and what
approving its proposals gains, by approval delay."""

import json
import re
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli.errors import friendly
from gpupool.model import SpecError
from gpupool.scheduler.advice import JOB_ACTIONS

_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def delays(text: str) -> list[float]:
    """``0,30m,4h,never`` in seconds (never: inf)."""
    out = []
    for item in (i.strip().lower() for i in text.split(",") if i.strip()):
        if item == "never":
            out.append(float("inf"))
            continue
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", item)
        if m is None:
            raise SpecError(f"delays: {item!r} is not N[s|m|h|d] or never", field="delays")
        out.append(float(m[1]) * _UNIT[m[2] or "m"])
    if not out:
        raise SpecError("delays: give at least one", field="delays")
    return out


def register(app: typer.Typer) -> None:
    @app.command("advisory")
    @friendly
    def advisory_command(
        file: Path = typer.Argument(..., help="Scenario YAML (see examples/seed-scenario.yaml)."),
        delay: str = typer.Option("0,30m,4h,never", help="Approval delays: N[s|m|h|d] or never."),
        actions: str = typer.Option("bind", help=f"Advisory actions, of {', '.join(JOB_ACTIONS)}."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Replay a scenario pooled, with the advisory actions' decisions held until a person
        approves each proposal after a delay (0: automatic; never: all rejected): proposals
        made, utilisation, p95 wait, and the card-hours approving them gains over never."""
        from gpupool.sim.advisory_sim import compare
        from gpupool.sim.scenario import load_scenario

        chosen = [a.strip() for a in actions.split(",") if a.strip()]
        unknown = [a for a in chosen if a not in JOB_ACTIONS]
        if unknown or not chosen:
            raise SpecError(f"actions: {unknown or actions!r} not of {', '.join(JOB_ACTIONS)}")
        result = compare(load_scenario(file), delays(delay), chosen)
        if as_json:
            typer.echo(json.dumps(result))
            return
        table = Table(
            "approval after", "proposals", "utilisation", "p95 wait", "card-hours", "gain",
            title=f"{result['scenario']}: {result['cards']} cards, advisory {', '.join(chosen)}",
        )  # fmt: skip
        for r in result["runs"]:
            d = r["delay_s"]
            wait = r["queue_delay_p95_s"]
            table.add_row(
                "never" if d is None else f"{d / 60:g} min",
                str(sum(r["proposals"].values())),
                f"{r['gpu_utilization']:.1%}",
                "-" if wait is None else f"{wait / 3600:.1f} h",
                f"{r['card_hours']:,.0f}",
                f"{r.get('gain_card_hours', 0):,.0f}",
            )
        Console().print(table)
