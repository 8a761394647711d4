"""``gpupool profile``: the servers and tokens ``gpupool login`` saved, as kubectl's
contexts (list, use, delete); ``gpupool --profile NAME ...`` picks one for one command."""

import json

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import emit
from gpupool.client import profiles

profile_app = typer.Typer(help="Saved servers and tokens (kubectl contexts): list, use, delete.")


@profile_app.command("list")
@client_command
def profile_list(as_json: bool = JSON_OPT) -> None:
    """Saved profiles; * marks the current one (tokens are never shown)."""
    data = profiles.load()
    rows = [
        {"current": "*" if name == data["current"] else "", "name": name, "server": p.get("server")}
        for name, p in sorted(data["profiles"].items())
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    emit(rows, ["current", "name", "server"], headers={"current": ""})
    if not rows:
        typer.echo("no profile yet: gpupool login --server URL --profile NAME")


@profile_app.command("use")
@client_command
def profile_use(
    name: str = typer.Argument(..., help="A profile from gpupool profile list"),
) -> None:
    """Make a profile the current one for later commands."""
    profiles.use(name)
    typer.echo(f"using profile {name}")


@profile_app.command("delete")
@client_command
def profile_delete(name: str = typer.Argument(...)) -> None:
    """Forget a saved profile and its token."""
    profiles.delete(name)
    typer.echo(f"profile {name} deleted")
