"""``gpupool simulate fairness``: a month of three teams borrowing an idle pool, today's static
weights against fair share over time (decayed borrowed card-hours), on the same demand."""

import json

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli.errors import friendly


def register(app: typer.Typer) -> None:
    @app.command("fairness")
    @friendly
    def fairness_command(
        cards: int = typer.Option(32, min=8, max=1024, help="Cards in the pool."),
        days: float = typer.Option(30.0, min=1, max=365, help="Days replayed."),
        seed: int = typer.Option(1, help="Seed of the jobs' run times."),
        half_life_days: float = typer.Option(7.0, min=0.01, help="Usage half-life (days)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Teams a (weight 1, always asking), b (weight 1, small backlog, away days 8-11) and
        c (weight 2, away days 18-20) borrow a pool its owner leaves idle: each team's share of
        the month's borrowed card-hours against its weight's share, and Jain's index, under
        today's static weights and under fair share over time."""
        from gpupool.sim.fairness_replay import DAY, compare

        result = compare(cards=cards, days=days, seed=seed, half_life_s=half_life_days * DAY)
        if as_json:
            typer.echo(json.dumps(result))
            return
        table = Table(
            "rule", "team", "weight share", "share of borrowed card-hours", "off by",
            title=f"{cards} cards, {days:g} days, seed {seed}, half-life {half_life_days:g} d",
        )  # fmt: skip
        for key in ("static", "fairshare"):
            run = result[key]
            for name, team in run["teams"].items():
                table.add_row(
                    run["rule"],
                    name,
                    f"{team['weight_share']:.1%}",
                    f"{team['share']:.1%}",
                    f"{team['off_by'] * 100:+.1f} pt",
                )
            table.add_row(run["rule"], "Jain's index", "", f"{run['jain']:.4f}", "")
        Console().print(table)
