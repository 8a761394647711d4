"""``gpupool cert create``: HTTPS for a newcomer — a site CA and a server certificate."""

from pathlib import Path

import typer

from gpupool.cli.errors import friendly
from gpupool.cli.output import zoned

cert_app = typer.Typer(help="Certificates for HTTPS: a site CA and the server's certificate.")


@cert_app.command("create")
@friendly
def create(
    host: list[str] = typer.Option(
        ..., "--host", help="A name or address agents and people reach the server by (repeat)."
    ),
    folder: Path = typer.Option(
        Path("/etc/gpupool/tls"), "--dir", help="Where the CA and the certificate are written."
    ),
    days: int = typer.Option(397, help="How long the server certificate is valid."),
) -> None:
    """Make the server a certificate signed by a CA of this site (made in --dir the first
    time, kept after: renewing keeps agents' pins). A running server picks up the new
    certificate within seconds, without a restart."""
    from gpupool.server.certs import CA_KEY, issue

    made = issue(folder, host, days)
    if made.new_ca:
        typer.echo(f"made a site CA: {made.ca} (its key {folder / CA_KEY} stays here, private)")
    typer.echo(
        f"certificate for {', '.join(host)} until {zoned(made.not_after.timestamp())}: "
        f"{made.chain} (key {made.key})"
    )
    typer.echo(f"serve with: gpupool server --tls-cert {made.chain} --tls-key {made.key}")
    typer.echo(f"agents and the CLI trust {made.ca} (GPUPOOL_CA); joins pin {made.ca_pin}")
