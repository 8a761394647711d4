"""``gpupool alerts``: what fires now (node lost, unhealthy or hot devices, jobs waiting too
long, idle cards, exhausted quotas, budgets), or what resolved."""

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import emit, plain, users_zone
from gpupool.client import ApiClient


@client_command
def alerts(
    state: str = typer.Option("firing", help="firing, resolved or all"),
    as_json: bool = JSON_OPT,
) -> None:
    """Alerts you may see, newest first (admins: all; others: their tenants')."""
    with ApiClient.from_env() as api:
        rows = api.get("/api/v1/alerts", state=state)
    emit(
        rows,
        ["id", "state", "kind", "tenant", "message"],
        as_json=as_json,
        cell=lambda r, c: users_zone(plain(r.get(c))),  # the server writes UTC
        empty=f"no alert {state}" if state != "all" else "no alert",
    )
