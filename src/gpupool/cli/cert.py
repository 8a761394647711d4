"""``gpupool cert create``: HTTPS for a newcomer — a site CA, the server's certificate, and
nodes' client certificates for mutual TLS."""

from pathlib import Path

import typer

from gpupool.cli.errors import friendly
from gpupool.cli.output import zoned
from gpupool.model import SpecError

cert_app = typer.Typer(help="Certificates for HTTPS: a site CA and the server's certificate.")


@cert_app.command("create")
@friendly
def create(
    host: list[str] = typer.Option(
        None, "--host", help="A name or address agents and people reach the server by (repeat)."
    ),
    client: str = typer.Option(
        None,
        "--client",
        help="Instead: a client certificate for this node's agent (mutual TLS), of the CA here.",
    ),
    folder: Path = typer.Option(
        Path("/etc/gpupool/tls"), "--dir", help="Where the CA and the certificates are written."
    ),
    days: int = typer.Option(397, help="How long the certificate is valid."),
) -> None:
    """Make the server a certificate signed by a CA of this site (made in --dir the first
    time, kept after: renewing keeps agents' pins). A running server picks up the new
    certificate within seconds, without a restart. With --client NODE: a certificate that
    node's agent presents where the server asks agents for one (--tls-client-ca)."""
    from gpupool.server.certs import CA_KEY, issue, issue_client

    if client is not None:
        if host:
            raise SpecError("give --host (the server's certificate) or --client, not both")
        pem, key, until = issue_client(folder, client, days)
        typer.echo(f"client certificate for node {client} until {zoned(until.timestamp())}:")
        typer.echo(f"  {pem} (key {key}); copy both to the node, then")
        typer.echo(f"  gpupool agent ... --tls-cert {pem.name} --tls-key {key.name}")
        typer.echo("  (or GPUPOOL_AGENT_CERT / GPUPOOL_AGENT_KEY in /etc/gpupool/agent.env)")
        return
    made = issue(folder, host or [], days)
    if made.new_ca:
        typer.echo(f"made a site CA: {made.ca} (its key {folder / CA_KEY} stays here, private)")
    typer.echo(
        f"certificate for {', '.join(host)} until {zoned(made.not_after.timestamp())}: "
        f"{made.chain} (key {made.key})"
    )
    typer.echo(f"serve with: gpupool server --tls-cert {made.chain} --tls-key {made.key}")
    typer.echo(f"agents and the CLI trust {made.ca} (GPUPOOL_CA); joins pin {made.ca_pin}")
