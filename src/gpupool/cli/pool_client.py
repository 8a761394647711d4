"""Pools against a running server: list them with how they cut their cards, and set one —
its sharing mode, placement policy and, for a hybrid pool, how many of its MIG-capable cards
may be MIG cards (the pool switches idle cards between MIG and sharing by demand within
them)."""

import typer

from gpupool.cli.admin_client import FORMAT_OPT, _listing
from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import show
from gpupool.client import ApiClient
from gpupool.model import SpecError

pool_app = typer.Typer(help="Pools: how their cards are cut (whole, MIG, shared, hybrid).")


def _bounds(p: dict) -> str:
    if p["sharing"] != "hybrid":
        return "-"
    high = "all" if p["mig_cards_max"] is None else p["mig_cards_max"]
    return f"{p['mig_cards_min']}..{high}"


@pool_app.command("list")
@client_command
def pool_list(fields: str = FORMAT_OPT, as_json: bool = JSON_OPT) -> None:
    """Every pool: sharing mode, policy, MIG cards allowed (hybrid pools)."""
    with ApiClient.from_env() as api:
        pools = api.get("/api/v1/pools")
    rows = [
        {"pool": p["name"], "sharing": p["sharing"], "policy": p["policy"],
         "mig_cards": _bounds(p), "description": p["description"][:40]}
        for p in pools
    ]  # fmt: skip
    _listing(pools, rows, fields, as_json, "pools")


@pool_app.command("set")
@client_command
def pool_set(
    name: str = typer.Argument(...),
    sharing: str = typer.Option(None, help="whole, mig, share or hybrid"),
    policy: str = typer.Option(None, help="Placement policy (gpupool policies)"),
    mig_min: int = typer.Option(
        None, "--mig-min", min=0, help="Hybrid: at least this many MIG cards"
    ),
    mig_max: int = typer.Option(None, "--mig-max", min=0, help="Hybrid: at most this many"),
    all_mig: bool = typer.Option(False, "--mig-max-all", help="Hybrid: no upper bound"),
    description: str = typer.Option(None, help="What the pool is for"),
    as_json: bool = JSON_OPT,
) -> None:
    """Create a pool or change it; options not given keep their value (admins). E.g.
    gpupool pool set gpu-a100 --sharing hybrid --mig-min 2 --mig-max 6."""
    if all_mig and mig_max is not None:
        raise SpecError("--mig-max and --mig-max-all: give one of them")
    with ApiClient.from_env() as api:
        current = next((p for p in api.get("/api/v1/pools") if p["name"] == name), None)
        body = {"name": name, "sharing": "whole", "policy": "auto", "description": "",
                "mig_cards_min": 0, "mig_cards_max": None}  # fmt: skip
        if current is not None:
            body.update({k: current[k] for k in body if k in current})
        given = {"sharing": sharing, "policy": policy, "description": description,
                 "mig_cards_min": mig_min, "mig_cards_max": mig_max}  # fmt: skip
        body.update({k: v for k, v in given.items() if v is not None})
        if all_mig:
            body["mig_cards_max"] = None
        if body["sharing"] != "hybrid" and sharing is not None and mig_min is None:
            body["mig_cards_min"], body["mig_cards_max"] = 0, None  # no longer hybrid
        out = api.put(f"/api/v1/pools/{name}", body)
    said = f"pool {out['name']}: {out['sharing']}, policy {out['policy']}"
    if out["sharing"] == "hybrid":
        said += f", MIG cards {_bounds(out)}"
    if out.get("note"):
        said += f" ({out['note']})"
    show(out, as_json, said)
