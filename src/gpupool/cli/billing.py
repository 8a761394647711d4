"""``gpupool billing``: what renting cards costs (quotes from the price catalog)."""

import json

import typer
from rich.console import Console
from rich.table import Table

from gpupool.billing.catalog import Catalog
from gpupool.billing.plans import PLANS, quote
from gpupool.cli.client import JSON_OPT, client_command

billing_app = typer.Typer(help="Prices and quotes for renting cards (CNY).")


@billing_app.command("quote")
@client_command
def billing_quote(
    model: str = typer.Option(..., help="GPU model, e.g. A100-80G, T4, H100-80G"),
    cards: int = typer.Option(1, help="How many cards"),
    plan: str = typer.Option("monthly", help=f"One of {', '.join(PLANS)} (annual: 15% off)"),
    periods: int = typer.Option(1, help="How many hours, days, months or years"),
    as_json: bool = JSON_OPT,
) -> None:
    """Price a rental from the list prices: gpupool billing quote --model A100-80G --cards 1
    --plan annual (2,500 x 12 x 0.85 = 25,500.00)."""
    import time

    out = quote(Catalog.default(), model, cards, plan, periods, time.time())
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    t = Table("line", "quantity", "unit", "unit price", "amount", box=None, header_style="bold")
    for line in out["lines"]:
        t.add_row(
            line["description"], line["quantity"], line["unit"], line["unit_price"], line["amount"]
        )
    t.caption = f"total ¥{out['total']} (CNY, list prices)"
    Console().print(t)
