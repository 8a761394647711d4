"""The ``gpupool`` command line: one Typer app."""

import os

import typer
from rich.console import Console
from rich.table import Table

from gpupool import __version__
from gpupool.cli import (
    acct,
    admin_client,
    agent,
    alerts,
    alloc,
    backup,
    bench,
    billing,
    cert,
    client,
    fairshare,
    jobs,
    join,
    kube,
    notebook,
    pool_client,
    profiles,
    proposals,
    reservations,
    sbatch,
    server,
    services,
    session_list,
    sessions,
    simulate,
    up,
)
from gpupool.cli.errors import PlainGroup, friendly
from gpupool.model import SpecError, parse_request
from gpupool.model.units import format_mib
from gpupool.sharing import TABLES, plan_repartition, table_for
from gpupool.sharing.vnpu import VnpuTable

app = typer.Typer(
    help="gpupool: pool every GPU of every server, slice it, schedule it, meter it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # click's plain help: option, its value and words on one line at 80 columns (typer's rich
    # panels gave every option a type column, <bool> on flags, and squeezed the words into a
    # 25-character sliver at 80 columns); tests/unit/test_cli_help.py checks every command
    rich_markup_mode=None,
    cls=PlainGroup,  # values it cannot read said in words, not the validator's
)


@app.callback()
def main_options(
    profile: str = typer.Option(
        None,
        "--profile",
        envvar="GPUPOOL_PROFILE",
        help="Use this saved server and token (gpupool profile list) for this command",
    ),
) -> None:
    """gpupool: pool every GPU of every server, slice it, schedule it, meter it."""
    if profile:
        os.environ["GPUPOOL_PROFILE"] = profile


app.add_typer(bench.app, name="bench")
app.add_typer(simulate.app, name="simulate")
app.add_typer(server.admin_app, name="admin")
server.admin_app.command("backup")(backup.backup)
server.admin_app.command("restore")(backup.restore)
app.command("server")(server.server)
app.command("up")(up.up)
app.command("agent")(agent.agent)
app.command("devices")(agent.devices)
app.command("login")(client.login)
app.add_typer(jobs.job_app, name="job")
app.add_typer(client.quota_app, name="quota")
app.command("nodes")(client.nodes)
app.command("queue")(client.queue)
app.command("tenants")(client.tenants)
app.command("alloc")(alloc.alloc)
app.command(
    "sbatch",
    help=sbatch.HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)(sbatch.sbatch)
app.command(
    "srun",
    help=sessions.SRUN_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)(sessions.srun)
app.command("shell")(sessions.shell)
app.command("exec")(sessions.exec_command)
app.command("attach")(sessions.attach)
app.command("sessions")(session_list.sessions)
app.command("notebook")(notebook.notebook_command)
app.command("whoami")(client.whoami_command)
app.command("acct")(acct.acct)
app.command("shares")(fairshare.shares)
app.command("priority")(fairshare.priority)
app.command("alerts")(alerts.alerts)
app.command("usage")(acct.usage)
app.add_typer(admin_client.tenant_app, name="tenant")
app.add_typer(admin_client.user_app, name="user")
app.add_typer(admin_client.token_app, name="token")
app.add_typer(admin_client.node_app, name="node")
admin_client.node_app.add_typer(join.node_token_app, name="token")
admin_client.node_app.command("remove")(join.node_remove)
app.command("join")(join.join_command)
app.add_typer(cert.cert_app, name="cert")
app.add_typer(reservations.reservation_app, name="reservation")
app.add_typer(pool_client.pool_app, name="pool")
app.add_typer(profiles.profile_app, name="profile")
app.add_typer(billing.billing_app, name="billing")
app.add_typer(services.service_app, name="service")
app.add_typer(kube.kube_app, name="kube")
app.add_typer(proposals.advisory_app, name="advisory")
app.add_typer(proposals.proposal_app, name="proposal")
mig_app = typer.Typer(help="MIG profile tables and re-partition plans.")
app.add_typer(mig_app, name="mig")


@app.command()
def version(
    server: bool = typer.Option(
        False, "--server", help="Also ask the logged-in server for its version (and the skew)."
    ),
) -> None:
    """Print this gpupool's version (from git: vX.Y.Z tags, X.Y.Z+1.devN+gHASH between)."""
    typer.echo(__version__)
    if server:
        from gpupool.cli.version_check import print_server_version

        print_server_version()


@app.command()
def policies(as_json: bool = typer.Option(False, "--json", help="Print JSON")) -> None:
    """Every placement policy: what it does, where it runs (the server, or only the FGD
    protocol's replays) and whether it is online (decides only from jobs that have arrived)."""
    import json
    from dataclasses import asdict

    from gpupool.scheduler.catalog import CATALOG

    if as_json:
        typer.echo(json.dumps([asdict(p) for p in CATALOG], indent=2))
        return
    table = Table("policy", "online", "where", "what it does")
    for p in CATALOG:
        table.add_row(p.name, "yes" if p.online else "[red]no[/red]", p.where, p.summary)
    Console().print(table)


@app.command()
@friendly
def request(spec: str = typer.Argument(..., help="e.g. 'gpu=A100-80G:2,cpu=4,mem=32GiB'")) -> None:
    """Check a resource request and show how gpupool reads it."""
    r = parse_request(spec)
    table = Table("field", "value", title=f"request {r.to_spec()}")
    table.add_row("slice", str(r.kind))
    table.add_row("devices / instances", str(r.gpu_count))
    for name, value in (
        ("gpu model", r.gpu_model),
        ("vendor", r.vendor),
        ("vnpu template" if r.is_vnpu else "mig profile", r.mig_profile),
        ("compute per device", f"{r.gpu_share_pct}%" if r.gpu_share_pct is not None else None),
        ("gpu memory per device", format_mib(r.gpu_mem_mib) if r.gpu_mem_mib else None),
    ):
        if value is not None:
            table.add_row(name, str(value))
    table.add_row("cpu", f"{r.cpu_millis}m")
    table.add_row("memory", format_mib(r.mem_mib))
    table.add_row("topology", str(r.topology))
    Console().print(table)


@mig_app.command("profiles")
@friendly
def mig_profiles(model: str = typer.Argument(..., help=f"One of {', '.join(TABLES)}")) -> None:
    """List a GPU model's MIG profiles (or an Ascend chip's vNPU templates)."""
    table = table_for(model)
    if table is None:
        raise SpecError(f"mig: {model!r} has no MIG table (known: {', '.join(TABLES)})")
    if isinstance(table, VnpuTable):  # Ascend: templates by AI Cores and AI CPUs
        out = Table("template", "AI cores", "AI CPUs", "memory", "vNPU type", title=table.model)
        for t in table.profiles:
            cores = f"{t.compute_slices}/{table.compute_slices}"
            cpus = f"{t.ai_cpu}/{table.ai_cpu}"
            out.add_row(t.name, cores, cpus, format_mib(t.memory_mib), t.vnpu_type)
        Console().print(out)
        return
    out = Table("profile", "id", "compute", "memory", "placements", title=table.model)
    for p in table.profiles:
        starts = ",".join(map(str, p.starts))
        out.add_row(
            p.name,
            str(p.profile_id),
            f"{p.compute_slices}/{table.compute_slices}",
            format_mib(p.memory_mib),
            f"{{{starts}}}:{p.size}",
        )
    Console().print(out)


@mig_app.command("plan")
@friendly
def mig_plan(
    model: str = typer.Argument(..., help="GPU model, e.g. A100-80G"),
    wanted: list[str] = typer.Argument(..., help="PROFILE=COUNT items, e.g. 3g.40gb=1 1g.10gb=4"),
) -> None:
    """Plan the MIG layout (profile@start) that holds the wanted instances."""
    counts: dict[str, int] = {}
    for item in wanted:
        name, sep, count = item.partition("=")
        if not sep or not (count.isascii() and count.isdigit()):
            raise SpecError(f"mig plan: {item!r} is not PROFILE=COUNT (e.g. 3g.40gb=1)")
        counts[name.strip().lower()] = counts.get(name.strip().lower(), 0) + int(count)
    for name, start in plan_repartition(model, counts):
        typer.echo(f"{name}@{start}")


if __name__ == "__main__":
    app()
