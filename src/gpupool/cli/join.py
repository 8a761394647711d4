"""The join flow's commands: ``gpupool node token create|list|revoke`` for admins, ``gpupool
join`` on a new GPU server, ``gpupool node remove`` to take one out for good."""

import os
import time
from pathlib import Path

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import SafeTable, local, show
from gpupool.client import ApiClient
from gpupool.client.join import join, write_join
from gpupool.model import SpecError
from gpupool.model.units import parse_point_in_time

node_token_app = typer.Typer(
    help="Bootstrap tokens: short-lived, of bounded uses, that new GPU servers trade for a node "
    "credential of their own (gpupool join)."
)
ENV_FILE = Path("/etc/gpupool/agent.env")  # what deploy/systemd/gpupool-agent.service reads
CA_FILE = Path("/etc/gpupool/ca.pem")
CA_HASH_HELP = (
    "sha256:... of the server's certificate (node token create prints it); for an https://"
    " server whose certificate is not trusted here already"
)


def _ttl_s(text: str) -> int:
    now = time.time()
    seconds = round(parse_point_in_time(text, now, "ttl") - now)
    if seconds <= 0 or not text.strip()[-1:].isalpha():
        raise SpecError(f"ttl: {text!r} is not a duration such as 30m, 1h or 2d", field="ttl")
    return seconds


@node_token_app.command("create")
@client_command
def token_create(
    ttl: str = typer.Option("1h", help="How long it can be used: 30m, 1h, 2d (at most 7d)"),
    uses: int = typer.Option(1, min=1, max=10_000, help="How many servers may join with it"),
    node: str = typer.Option(None, help="The one node name it joins [default: any]"),
    as_json: bool = JSON_OPT,
) -> None:
    """Make a bootstrap token and print the command a new server joins with (admins)."""
    body = {"ttl_s": _ttl_s(ttl), "uses": uses, "node": node}
    with ApiClient.from_env() as api:
        out = api.post("/api/v1/join-tokens", body)
        server = api.server
    pin = f" --ca-hash {out['ca_hash']}" if out["ca_hash"] else ""
    name = out["node"] or "NODE"
    command = f"gpupool join {server} --token {out['token']}{pin} --name {name}"
    if as_json:
        show({**out, "command": command}, True, "")
        return
    left = f"{out['uses_left']} use(s) until {local(out['expires_at'])}"
    show(out, False, f"bootstrap token {out['id']}: {left}; on the new server, as root:")
    show(out, False, f"  {command}")


@node_token_app.command("list")
@client_command
def token_list(as_json: bool = JSON_OPT) -> None:
    """Bootstrap tokens (never their secret) with the uses left."""
    with ApiClient.from_env() as api:
        rows = api.get("/api/v1/join-tokens")
    table = SafeTable("id", "prefix", "node", "uses left", "expires", "by")
    for r in rows:
        table.add_row(str(r["id"]), r["prefix"], r["node"] or "any", str(r["uses_left"]),
                      local(r["expires_at"]), r["created_by"])  # fmt: skip
    show(rows, as_json, table)


@node_token_app.command("revoke")
@client_command
def token_revoke(
    token_id: int = typer.Argument(..., help="Its id (gpupool node token list)"),
) -> None:
    """Spend a bootstrap token's uses now."""
    with ApiClient.from_env() as api:
        api.delete(f"/api/v1/join-tokens/{token_id}")
    typer.echo(f"bootstrap token {token_id} revoked")


@client_command
def join_command(
    server: str = typer.Argument(..., help="The server's URL, e.g. https://control:8080"),
    token: str = typer.Option(..., envvar="GPUPOOL_JOIN_TOKEN", help="The bootstrap token"),
    ca_hash: str = typer.Option(None, "--ca-hash", help=CA_HASH_HELP),
    name: str = typer.Option(None, help="This node's name [default: this host's name]"),
    env_file: Path = typer.Option(ENV_FILE, help="Where the agent's service reads its settings"),
    ca_file: Path = typer.Option(CA_FILE, help="Where the server's certificate chain goes"),
    install_service: bool = typer.Option(
        False,
        "--install-service",
        help="Also install the agent's systemd unit and start it (systemctl enable --now)",
    ),
    unit_dir: Path = typer.Option(
        Path("/etc/systemd/system"), help="Where --install-service writes the unit"
    ),
) -> None:
    """Join this machine to a pool: check the server against --ca-hash, trade the bootstrap
    token for this node's own credential and write the agent service's environment file;
    with --install-service, install and start the agent's unit too."""
    node = name or os.uname().nodename
    targets = [env_file, ca_file]
    if install_service:
        from gpupool.client.agent_service import UNIT, preflight

        preflight()
        targets.append(unit_dir / UNIT)
    for path in targets:  # before the token is spent, not after
        folder = path.parent
        while not folder.exists():
            folder = folder.parent
        if not os.access(folder, os.W_OK):
            raise SpecError(
                f"{path}: cannot write here (run as root, or give --env-file/--ca-file/--unit-dir)"
            )
    joined = join(server, token, node, ca_hash)
    written = write_join(joined, env_file, ca_file)
    typer.echo(f"node {node} joined {joined.server}; wrote {', '.join(map(str, written))}")
    if not install_service:
        typer.echo("start its agent: systemctl enable --now gpupool-agent (or --install-service)")
        return
    from gpupool.client.agent_service import install_and_start

    unit = install_and_start(unit_dir, env_file)
    typer.echo(f"installed {unit} and started gpupool-agent (systemctl status gpupool-agent)")


@client_command
def node_remove(
    name: str = typer.Argument(...),
    wait: float = typer.Option(
        0, min=0, help="Seconds to wait for its running jobs to finish after draining it"
    ),
) -> None:
    """Take a node out for good: drain it, forget it once nothing runs there, and revoke its
    agent's credential (to come back, it joins again) (admins)."""
    deadline = time.monotonic() + wait
    with ApiClient.from_env() as api:
        api.post(f"/api/v1/nodes/{name}/drain", {"reason": "being removed", "now": False})
        while True:
            live = api.get(f"/api/v1/nodes/{name}/allocations")
            if not live:
                break
            if time.monotonic() >= deadline:
                raise SpecError(
                    f"node {name} is drained but {len(live)} allocation(s) still run there: "
                    f"wait for them (--wait SECONDS) or requeue them (gpupool node drain {name} "
                    "--now), then remove it again"
                )
            time.sleep(1.0)
        api.delete(f"/api/v1/nodes/{name}?revoke=true")
    typer.echo(f"node {name} removed; its agent's credential is revoked")
