"""``gpupool service ...``: elastic inference services (replicas the pool scales with load)."""

import json
import time
from urllib.parse import quote

import typer
from rich.console import Console

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import emit
from gpupool.cli.pairs import key_values
from gpupool.client import ApiClient
from gpupool.model import SpecError

service_app = typer.Typer(
    help="Elastic inference services: replicas scaled with their load, ready endpoints for a "
    "load balancer, forecast against actual."
)
TENANT = typer.Option(None, help="The service's tenant [default: yours]")
COLUMNS = ["name", "tenant", "request", "ready", "desired", "min", "max", "metric", "policy"]
REPLICA_COLUMNS = ["job_id", "state", "node", "endpoint", "ready", "draining", "parked"]


def _path(name: str, tail: str = "", tenant: str | None = None) -> str:
    query = f"?tenant={quote(tenant)}" if tenant else ""
    return f"/api/v1/services/{quote(name, safe='')}{tail}{query}"


def _row(svc: dict) -> dict:
    return {**svc, "min": svc["min_replicas"], "max": svc["max_replicas"],
            "metric": f"{svc['metric']} {svc['target']:g}"}  # fmt: skip


@service_app.command("create")
@client_command
def create(
    name: str = typer.Argument(..., help="The service's name (unique in its tenant)"),
    command: list[str] = typer.Argument(None, help="What a replica runs, after --"),
    request: str = typer.Option(
        ..., help="One replica's request, e.g. gpu=1, gpu_share=0.5 or gpu_mem=20GiB"
    ),
    target: float = typer.Option(..., help="The metric's target per replica"),
    metric: str = typer.Option(
        "rps", help="rps, concurrency, latency_p95 (seconds) or gpu_util (%)"
    ),
    min_replicas: int = typer.Option(1, "--min", help="Fewest replicas"),
    max_replicas: int = typer.Option(4, "--max", help="Most replicas"),
    utilisation: float = typer.Option(0.7, help="Headroom: replicas run at this share"),
    stable: float = typer.Option(60, help="Stable window in seconds (panic: a tenth)"),
    scale_down_delay: float = typer.Option(0, help="Seconds scale-in waits for lower load"),
    startup: float = typer.Option(60, help="Seconds from start to ready, for prediction"),
    policy: str = typer.Option("reactive", help="reactive, or predictive (after a day)"),
    warm: int = typer.Option(
        0, min=0, help="Engines kept: replicas past the need park and wake in seconds"
    ),
    placement: str = typer.Option(
        "spread", help="spread (a replica per node first) or pack (few nodes)"
    ),
    health_path: str = typer.Option("/health", help="The replicas' readiness path"),
    image: str = typer.Option(None, help="An OCI image instead of (or with) a command"),
    env: list[str] = typer.Option([], help="NAME=VALUE for the replicas (repeatable)"),
    tenant: str = TENANT,
    as_json: bool = JSON_OPT,
) -> None:
    """Create a service; its replicas get $PORT to listen on and answer the health path
    (2xx when ready) and /metrics (gpupool_replica_requests_total, ..._in_flight)."""
    body = {
        "name": name, "request": request, "command": list(command or []), "image": image,
        "env": key_values(env, "env", "NAME=VALUE"),
        "min_replicas": min_replicas, "max_replicas": max_replicas,
        "metric": metric, "target": target, "utilisation": utilisation, "stable_s": stable,
        "scale_down_delay_s": scale_down_delay, "startup_s": startup, "policy": policy,
        "health_path": health_path, "tenant": tenant, "warm": warm, "placement": placement,
    }  # fmt: skip
    with ApiClient.from_env() as api:
        svc = api.post("/api/v1/services", {k: v for k, v in body.items() if v is not None})
    for warning in svc.get("warnings") or []:
        typer.echo(f"warning: {warning}", err=True)
    emit([_row(svc)], COLUMNS, as_json=as_json)


@service_app.command("list")
@client_command
def list_services(tenant: str = TENANT, as_json: bool = JSON_OPT) -> None:
    """The services you can see."""
    with ApiClient.from_env() as api:
        rows = api.get("/api/v1/services", tenant=tenant)
    emit([_row(r) for r in rows], COLUMNS, as_json=as_json, empty="no services")


@service_app.command("show")
@client_command
def show(name: str, tenant: str = TENANT, as_json: bool = JSON_OPT) -> None:
    """A service, its status and its replicas."""
    with ApiClient.from_env() as api:
        svc = api.get(_path(name, tenant=tenant))
    if as_json:
        typer.echo(json.dumps(svc, indent=2))
        return
    emit([_row(svc)], COLUMNS)
    Console().print(f"status: {svc['status']}", soft_wrap=True, highlight=False)
    emit(svc["replicas"], REPLICA_COLUMNS, empty="no replicas")


@service_app.command("scale")
@client_command
def scale(
    name: str,
    replicas: str = typer.Argument(..., help="A number to pin, or auto for the autoscaler"),
    tenant: str = TENANT,
    as_json: bool = JSON_OPT,
) -> None:
    """Pin the replicas (between the service's min and max) or give them back (auto)."""
    if replicas != "auto" and not replicas.isdigit():
        raise SpecError(f"replicas: {replicas!r} is neither a number nor auto", field="replicas")
    pinned = None if replicas == "auto" else int(replicas)
    with ApiClient.from_env() as api:
        svc = api.post(_path(name, "/scale", tenant), {"replicas": pinned})
    if as_json:
        emit([_row(svc)], COLUMNS, as_json=True)
        return
    now = f"{svc['ready']} ready now"
    if pinned is None:  # what it wants is the autoscaler's next pass, not the old desired
        typer.echo(f"service {name}: replicas back to the autoscaler ({svc['min_replicas']}"
                   f"..{svc['max_replicas']}); {now}")  # fmt: skip
    else:
        typer.echo(f"service {name}: pinned at {pinned} replicas (was {svc['desired']}); {now}, "
                   "the rest start or drain within seconds")  # fmt: skip


@service_app.command("delete")
@client_command
def delete(name: str, tenant: str = TENANT) -> None:
    """Delete a service; its replicas stop now."""
    with ApiClient.from_env() as api:
        api.delete(_path(name, tenant=tenant))
    typer.echo(f"deleted service {name}")


@service_app.command("endpoints")
@client_command
def endpoints(name: str, tenant: str = TENANT, as_json: bool = JSON_OPT) -> None:
    """The ready replicas' host:port (what a load balancer sends requests to)."""
    with ApiClient.from_env() as api:
        rows = api.get(_path(name, "/endpoints", tenant))
    emit(rows, ["job_id", "endpoint"], as_json=as_json, empty="no ready replicas")


def hourly(samples: list[dict]) -> list[dict]:
    """Samples (one a minute) summed up per hour: load mean and peak, the forecasts' mean and
    how often the peak that followed a forecast stayed within it."""
    out: dict[int, dict] = {}
    for s in samples:
        h = out.setdefault(int(s["time"] // 3600), {"loads": [], "forecasts": [], "ready": []})
        h["loads"].append(s["load"])
        h["ready"].append(s["ready"])
        if s["forecast"] is not None:
            h["forecasts"].append(s["forecast"])
    rows = []
    for hour, h in sorted(out.items()):
        forecast = sum(h["forecasts"]) / len(h["forecasts"]) if h["forecasts"] else None
        rows.append({
            "hour": time.strftime("%m-%d %H:00", time.localtime(hour * 3600)),
            "load": round(sum(h["loads"]) / len(h["loads"]), 3),
            "peak": round(max(h["loads"]), 3),
            "forecast": None if forecast is None else round(forecast, 3),
            "ready": round(sum(h["ready"]) / len(h["ready"]), 1),
        })  # fmt: skip
    return rows


@service_app.command("forecast")
@client_command
def forecast(
    name: str,
    hours: float = typer.Option(24, help="How far back"),
    tenant: str = TENANT,
    as_json: bool = JSON_OPT,
) -> None:
    """The service's load per hour against the forecasts made (predictive services), with
    the replicas that were ready, and what its autoscaler says now."""
    with ApiClient.from_env() as api:
        got = api.get(_path(name, "/history", tenant), hours=hours)
    if as_json:
        typer.echo(json.dumps(got, indent=2))
        return
    Console().print(f"{got['policy']}: {got['status']}", soft_wrap=True, highlight=False)
    emit(hourly(got["samples"]), ["hour", "load", "peak", "forecast", "ready"],
         empty="no load samples yet (one a minute once replicas report)")  # fmt: skip
