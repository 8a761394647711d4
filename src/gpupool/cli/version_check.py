"""``gpupool version --server``: the logged-in server's release beside this one's."""

import typer

from gpupool import __version__
from gpupool.cli.errors import print_error
from gpupool.client.http import ApiClient, ClientError
from gpupool.model.versions import parse


def print_server_version() -> None:
    try:
        with ApiClient.from_env() as api:
            theirs = api.server_version()
            where = api.server
    except ClientError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    if theirs is None:
        typer.echo(f"server {where}: no version said (not reachable, or older than 0.1.1)")
        raise typer.Exit(1)
    typer.echo(f"server {where}: {theirs}")
    mine, server = parse(__version__), parse(theirs)
    if mine and server and (mine.major, mine.minor) != (server.major, server.minor):
        typer.echo(
            f"warning: this CLI is {mine.major}.{mine.minor}, the server "
            f"{server.major}.{server.minor}: commands and the server's API may differ; install "
            "the server's release here",
            err=True,
        )
