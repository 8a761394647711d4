"""``gpupool kube ...``: gpupool as the GPU scheduler of a Kubernetes cluster."""

import logging
import os
import signal
import socket
import threading

import typer

from gpupool.cli.errors import friendly

kube_app = typer.Typer(help="Kubernetes mode: schedule, slice and bill GPUs for pods.")


@kube_app.command("run")
@friendly
def run(
    config: str = typer.Option(
        ..., help="The Kubernetes-mode settings (YAML): namespaces, tenants."
    ),
    kubeconfig: str = typer.Option(
        None, help="A kubeconfig file [default: in-cluster service account, else $KUBECONFIG]."
    ),
    leader_elect: bool = typer.Option(
        True, help="Take the gpupool-system/gpupool-scheduler Lease before scheduling."
    ),
    lease_namespace: str = typer.Option("gpupool-system", help="Namespace of the Lease."),
    identity: str = typer.Option(
        None, help="This replica's name in the Lease and Events [default: host name + PID]."
    ),
) -> None:
    """Schedule pods whose spec.schedulerName is gpupool until stopped (SIGTERM / Ctrl-C)."""
    from gpupool.kube.api import KubeApi
    from gpupool.kube.config import load_config
    from gpupool.kube.lease import LeaderElector
    from gpupool.kube.scheduler import KubeScheduler

    settings = load_config(config)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    who = identity or f"{socket.gethostname()}-{os.getpid()}"
    api = KubeApi(kubeconfig)
    stop = threading.Event()
    elector = None
    if leader_elect:
        elector = LeaderElector(KubeApi(kubeconfig), who, lease_namespace)
        threading.Thread(target=elector.run, args=(stop,), daemon=True).start()
    scheduler = KubeScheduler(api, settings, who, elector.is_leader if elector else lambda: True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    scheduler.start()
    typer.echo(
        f"gpupool kube scheduler {who} on {api.host}: scheduling {settings.scheduler_name!r} pods"
    )
    stop.wait()
    scheduler.stop()
    typer.echo(f"stopped after {scheduler.stats['binds']} bindings")
