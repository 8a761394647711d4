"""``gpupool agent`` (run the node agent) and ``gpupool devices`` (show what discovery finds)."""

import contextlib
import json
import logging
import os
import signal
import socket
import threading
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli.errors import friendly
from gpupool.cli.pairs import key_values
from gpupool.model import SpecError

DEVICES_HELP = "auto (NVIDIA, Ascend, Cambricon, Hygon), simulated:4xA100-80G, or a YAML file"
ISOLATION_HELP = (
    "tenant-users: each tenant's workloads run as its own Unix user, in a 0700 folder and a "
    "cgroup of their own (needs root); none: as the agent's user; auto: tenant-users when root"
)


def port_range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        ports = (int(low), int(high))
    except ValueError:
        ports = (0, 0)
    if not sep or not 1024 <= ports[0] <= ports[1] <= 65535:
        raise SpecError(f"--replica-ports: {text!r} is not LOW-HIGH within 1024-65535")
    return ports


@friendly
def agent(
    server: str = typer.Option(
        ...,
        help="The server's URL, e.g. http://10.0.0.1:8080; several, comma-separated (servers "
        "of one database): the agent moves to the next when one cannot be reached",
    ),
    token: str = typer.Option(
        None, envvar="GPUPOOL_AGENT_TOKEN", help="An agent token (role agent)"
    ),
    name: str = typer.Option(
        None, envvar="GPUPOOL_NODE", help="Node name [default: this host's name]"
    ),
    devices: str = typer.Option("auto", help=DEVICES_HELP),
    state_dir: Path = typer.Option(
        Path("gpupool-agent"), help="Where running workloads are recorded (restart safety)"
    ),
    heartbeat: float | None = typer.Option(
        None,
        min=0.2,
        help="Seconds between heartbeats [default: as the server advises (10 at its "
        "defaults); 5 with a server that does not]",
        show_default=False,
    ),
    channel: bool = typer.Option(
        True,
        help="Beat and take orders on one WebSocket where the server offers it (no request "
        "while idle); --no-channel: heartbeats and long polls over HTTP only",
    ),
    grace: float = typer.Option(10.0, min=0, help="Seconds between SIGTERM and SIGKILL"),
    label: list[str] = typer.Option([], help="KEY=VALUE node label (repeatable)"),
    pool: str = typer.Option("default", help="The pool this node joins"),
    share: bool = typer.Option(
        False, help="Offer whole cards as fractional shares (MPS / HAMi-core); MIG cards stay MIG"
    ),
    isolation: str = typer.Option("auto", help=ISOLATION_HELP),
    tenant_user: list[str] = typer.Option(
        [], help="TENANT=USER: run this tenant's workloads as an existing user (repeatable)"
    ),
    user_prefix: str = typer.Option("gp-", help="Prefix of the users created for tenants"),
    no_create_users: bool = typer.Option(
        False,
        "--no-create-users",
        help="Fail a tenant's jobs when it has no --tenant-user mapping, rather than create a "
        "system user for it",
    ),
    work_dir: Path = typer.Option(
        None,
        help="Where workloads get their own folders [default: /var/lib/gpupool/work with "
        "tenant-users, else STATE_DIR/work]",
    ),
    no_cgroups: bool = typer.Option(
        False, "--no-cgroups", help="Do not confine workloads in cgroups of their grant"
    ),
    cgroup_parent: str = typer.Option("gpupool", help="Cgroup folder of the workloads' cgroups"),
    pids_max: int = typer.Option(4096, min=16, help="Most processes one workload may have"),
    tenant_pids_max: int = typer.Option(
        16384, min=0, help="Most processes of one tenant's workloads together (0: no ceiling)"
    ),
    default_mem: int = typer.Option(
        None,
        min=1,
        help="MiB a card for jobs that ask no mem=, where an older server reserved none "
        "[default: the memory offered / its cards]",
    ),
    reserve_mem: int = typer.Option(
        None,
        min=0,
        help="MiB of RAM kept from the pool for the system and the agent; the rest is offered "
        "and bounds all workloads together [default: 5%, at least 1 GiB, at most 16 GiB]",
    ),
    replica_ports: str = typer.Option(
        "20000-32767",
        help="LOW-HIGH: the ports service replicas get on this node, chosen by the agent "
        "(tenant-users: published into the tenant's namespace)",
    ),
    disk_max: int = typer.Option(
        100 * 1024, min=0, help="MiB a workload's working folder may use (0: unlimited)"
    ),
    private_tmp: bool = typer.Option(
        True, help="tenant-users: a private /tmp and /dev/shm per workload (tmpfs)"
    ),
    tenant_network: bool = typer.Option(
        True, help="tenant-users: one network namespace per tenant on this node"
    ),
    log_max: int = typer.Option(
        64, min=1, max=1 << 20, help="MiB of a job's output kept on the server (per workload)"
    ),
    container_runtime: str = typer.Option(
        None,
        help="Absolute path of the docker/podman client for image jobs [default: the first "
        "found in /usr/local/bin, /usr/bin, /bin]",
    ),
    ca: str = typer.Option(
        None,
        envvar="GPUPOOL_CA",
        help="A CA file to trust for an https:// server (a site's own CA) [default: the system's]",
    ),
    tls_cert: str = typer.Option(
        None,
        envvar="GPUPOOL_AGENT_CERT",
        help="Mutual TLS: this node's client certificate (gpupool cert create --client NODE)",
    ),
    tls_key: str = typer.Option(
        None, envvar="GPUPOOL_AGENT_KEY", help="Mutual TLS: the client certificate's key"
    ),
) -> None:
    """Run the node agent: register this node, heartbeat telemetry, run its workloads.
    Stopping the agent leaves workloads running; a restarted agent adopts them, unless it
    stays away longer than its lease (then the workloads stop themselves)."""
    from gpupool.agent import Agent, AgentConfig
    from gpupool.agent.identity import parse_mapping
    from gpupool.agent.oom import protect
    from gpupool.agent.workloads import IsolationConfig
    from gpupool.server.logs import configure

    if not token:
        raise SpecError("agent: give --token or set GPUPOOL_AGENT_TOKEN")
    if (tls_cert is None) != (tls_key is None):
        raise SpecError("agent: --tls-cert and --tls-key go together (mutual TLS)")
    configure("info", True)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = AgentConfig(
        server=server,
        token=token,
        name=name or socket.gethostname(),
        devices=devices,
        state_dir=state_dir,
        heartbeat_s=heartbeat,
        channel=channel,
        ca_file=ca,
        cert_file=tls_cert,
        key_file=tls_key,
        grace_s=grace,
        labels=key_values(label, "label"),
        pool=pool,
        share=share,
        log_max_bytes=log_max * 1024 * 1024,
        reserve_mem_mib=reserve_mem,
        isolation=IsolationConfig(
            mode=isolation,
            tenant_users=parse_mapping(tenant_user),
            user_prefix=user_prefix,
            create_users=not no_create_users,
            work_dir=work_dir,
            cgroups=not no_cgroups,
            cgroup_parent=cgroup_parent,
            pids_max=pids_max,
            container_runtime=container_runtime,
            tenant_pids_max=tenant_pids_max,
            default_mem_mib=default_mem,
            disk_max_mib=disk_max,
            private_tmp=private_tmp,
            network=tenant_network,
            replica_ports=port_range(replica_ports),
        ),
    )
    protect()  # workloads, not the agent, are the OOM killer's pick (root only)
    worker = Agent(config)
    for problem in worker.errors:
        typer.echo(f"warning: {problem}", err=True)
    typer.echo(f"agent {config.name}: {len(worker.located)} device(s), server {server}")
    typer.echo(f"agent {config.name}: {worker.launcher.describe()}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        worker.run(stop)
    if worker.refusal is not None:  # its credential is refused: retrying cannot help
        from gpupool.agent.refusal import EXIT_REFUSED

        typer.echo(f"error: {worker.refusal}", err=True)
        raise typer.Exit(EXIT_REFUSED)


@friendly
def devices(
    spec: str = typer.Option("auto", "--devices", help=DEVICES_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    isolation: str = typer.Option("auto", help=ISOLATION_HELP),
) -> None:
    """Show the accelerators discovery finds on this machine (and what it could not read),
    and how an agent started here would isolate its workloads."""
    from gpupool.agent.workloads import preview
    from gpupool.devices import discover

    located, inventory = discover(spec, socket.gethostname())
    workloads = preview(isolation)
    if as_json:
        rows = [
            {
                "index": loc.index,
                "backend": loc.backend.name,
                "vendor": loc.device.vendor.value,
                "local_index": loc.device.local_index,
                "model": loc.device.model,
                "product": loc.device.product,
                "memory_mib": loc.device.memory_mib,
                "uuid": loc.device.uuid,
                "mode": loc.device.mode.value,
                "mig": [[m.profile, m.start, m.uuid] for m in loc.device.mig],
                "healthy": loc.device.healthy,
            }
            for loc in located
        ]
        out = {"devices": rows, "errors": inventory.errors, "workloads": workloads}
        typer.echo(json.dumps(out, indent=2))
        return
    table = Table("#", "backend", "model", "memory MiB", "mode", "uuid", title=os.uname().nodename)
    for loc in located:
        d = loc.device
        mode = d.mode.value + (f" ({len(d.mig)} instances)" if d.mig else "")
        table.add_row(str(loc.index), loc.backend.name, d.model, str(d.memory_mib), mode, d.uuid)
    Console().print(table)
    for problem in inventory.errors:
        typer.echo(f"warning: {problem}", err=True)
    if not located:
        typer.echo("no accelerator found (try --devices simulated:4xA100-80G)")
    typer.echo(f"workloads: {workloads}")
