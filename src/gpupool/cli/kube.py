"""``gpupool kube ...``: gpupool as the GPU scheduler of a Kubernetes cluster."""

import logging
import os
import signal
import socket
import threading
from typing import Any

import typer

from gpupool.cli.errors import friendly
from gpupool.extras import require

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
    server: str = typer.Option(
        None, help="The gpupool server to report nodes and pods to (usage, invoices, dashboard)."
    ),
    token: str = typer.Option(
        None, envvar="GPUPOOL_TOKEN", help="A token of role kubernetes on --server."
    ),
    grant_key: str = typer.Option(
        None,
        help="File with the key that signs grants, shared with the device plugin "
        "[default: $GPUPOOL_GRANT_KEY].",
    ),
) -> None:
    """Schedule pods whose spec.schedulerName is gpupool until stopped (SIGTERM / Ctrl-C)."""
    require("kubernetes", "gpupool kube scheduler")
    from gpupool.kube.api import KubeApi, reachable
    from gpupool.kube.config import load_config
    from gpupool.kube.grants import GrantKey
    from gpupool.kube.lease import LeaderElector
    from gpupool.kube.scheduler import KubeScheduler
    from gpupool.model import SpecError

    settings = load_config(config)
    key = GrantKey.load(grant_key)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    who = identity or f"{socket.gethostname()}-{os.getpid()}"
    api = KubeApi(kubeconfig)
    reachable(api)
    stop = threading.Event()
    elector = None
    if leader_elect:
        elector = LeaderElector(KubeApi(kubeconfig), who, lease_namespace)
        threading.Thread(target=elector.run, args=(stop,), daemon=True).start()
    leader = elector.is_leader if elector else lambda: True
    scheduler = KubeScheduler(api, settings, key, who, leader)
    ledger = None
    if settings.tenants_from == "server" and not server:
        raise SpecError("tenants_from: server needs --server (and a kubernetes token)")
    if server:
        from gpupool.kube.ledger import Ledger

        if not token:
            raise SpecError("--server needs a token of role kubernetes (--token or GPUPOOL_TOKEN)")
        from_server = scheduler.set_policy if settings.tenants_from == "server" else None
        ledger = Ledger(
            server, token, settings, scheduler.nodes.snapshot, scheduler.reported_pods,
            scheduler.preempted, is_leader=scheduler.is_leader, on_policy=from_server, key=key,
        )  # fmt: skip
        threading.Thread(target=ledger.run, args=(stop,), daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    scheduler.start()
    typer.echo(
        f"gpupool kube scheduler {who} on {api.host}: scheduling {settings.scheduler_name!r} pods"
    )
    stop.wait()
    scheduler.stop()
    if ledger is not None:
        try:
            ledger.sync()  # what ended in the last seconds
        except Exception as exc:
            typer.echo(f"warning: last report to {server} failed: {exc}", err=True)
    st = scheduler.stats
    mean_ms = 1000 * scheduler.cycle_s / max(1, st["cycles"])
    typer.echo(
        f"stopped after {st['binds']} bindings in {st['cycles']} cycles "
        f"(mean {mean_ms:.0f} ms), {st['bind_errors']} failed bindings"
    )


@kube_app.command("device-plugin")
@friendly
def device_plugin(
    node: str = typer.Option(
        None, help="This node's name [default: $NODE_NAME, set from the pod's spec.nodeName]."
    ),
    devices: str = typer.Option("auto", help="auto (NVML, npu-smi, ...) or simulated:8xA100-80G."),
    kubeconfig: str = typer.Option(None, help="A kubeconfig [default: in-cluster]."),
    socket_dir: str = typer.Option(
        "/var/lib/kubelet/device-plugins", help="The kubelet's device-plugin folder."
    ),
    slots: int = typer.Option(100, min=1, max=10000, help="gpupool.io/slice units advertised."),
    grant_key: str = typer.Option(
        None,
        help="File with the key that signs grants, shared with the scheduler "
        "[default: $GPUPOOL_GRANT_KEY].",
    ),
) -> None:
    """Serve the kubelet device plugin for gpupool.io/slice on this node until stopped; a
    kubelet restart (which removes the socket) is followed by a new registration."""
    from pathlib import Path

    name = _node_name("gpupool kube device-plugin", node)  # first: says what is missing
    from gpupool.kube.device_plugin import SlicePlugin, serve
    from gpupool.kube.grants import GrantKey

    key = GrantKey.load(grant_key)
    api, located = _node_plugin_start(name, devices, kubeconfig)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    sock = Path(socket_dir) / "gpupool.sock"
    while not stop.is_set():
        plugin = SlicePlugin(api, name, located, key, slots)
        server = serve(plugin, socket_dir)
        typer.echo(f"gpupool device plugin on {name}: {len(located)} devices, {slots} slots")
        while not stop.wait(2.0) and sock.exists():
            pass
        plugin.stop.set()
        server.stop(1)


@kube_app.command("dra-plugin")
@friendly
def dra_plugin(
    node: str = typer.Option(
        None, help="This node's name [default: $NODE_NAME, set from the pod's spec.nodeName]."
    ),
    devices: str = typer.Option("auto", help="auto (NVML, npu-smi, ...) or simulated:8xA100-80G."),
    kubeconfig: str = typer.Option(None, help="A kubeconfig [default: in-cluster]."),
    plugin_dir: str = typer.Option(
        "/var/lib/kubelet/plugins/gpu.gpupool.io", help="Where the plugin's socket goes."
    ),
    registry_dir: str = typer.Option(
        "/var/lib/kubelet/plugins_registry", help="The kubelet's plugin registry folder."
    ),
    cdi_dir: str = typer.Option("/var/run/cdi", help="Where CDI specs of prepared claims go."),
) -> None:
    """Serve the DRA kubelet plugin of driver gpu.gpupool.io on this node until stopped: the
    kubelet prepares each ResourceClaim allocated here through it, and gets a CDI device whose
    environment enforces the allocated card, MIG instance or share."""
    name = _node_name("gpupool kube dra-plugin", node)  # first: says what is missing
    from gpupool.kube.dra.kubelet_plugin import ClaimPlugin, serve

    api, located = _node_plugin_start(name, devices, kubeconfig)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server, _ = serve(ClaimPlugin(api, name, located, cdi_dir), plugin_dir, registry_dir)
    typer.echo(f"gpupool DRA plugin on {name}: {len(located)} devices, CDI specs in {cdi_dir}")
    stop.wait()
    server.stop(1)


def _node_name(what: str, node: str | None) -> str:
    """This node's name (``--node`` or $NODE_NAME), once the extras a node plugin needs are
    known to be installed; logging set up."""
    require("kubernetes", what)
    require("grpc", what)
    from gpupool.model import SpecError

    name = node or os.environ.get("NODE_NAME")
    if not name:
        raise SpecError("node: give --node or set NODE_NAME (the DaemonSet sets it)")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return name


def _node_plugin_start(name: str, devices: str, kubeconfig: str | None) -> Any:
    """What a node plugin starts with: an API client and this node's devices (found, and
    written on the Node, where the scheduler reads UUIDs and models)."""
    from gpupool.devices.detect import discover
    from gpupool.kube.api import ApiError, KubeApi, reachable
    from gpupool.kube.device_plugin import publish_devices
    from gpupool.model import SpecError

    api = KubeApi(kubeconfig)
    located, inventory = discover(devices, name)
    for problem in inventory.errors:
        typer.echo(f"warning: device discovery: {problem}", err=True)
    reachable(api)
    try:
        publish_devices(api, name, located)
    except ApiError as exc:
        raise SpecError(f"node {name}: cannot write its devices: {exc}") from None
    return api, located
