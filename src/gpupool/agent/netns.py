"""One network namespace per tenant on this node, shared by that tenant's workloads: their
loopback (127.0.0.1 listeners) and abstract UNIX sockets are the tenant's alone — another
tenant's job on the same node neither sees nor reaches them.

Each namespace gets a veth pair to the host: ``gpn-<id>`` on the host with 10.231.N.1/30, and
``eth0`` inside with 10.231.N.2/30 and the default route through the host; the host forwards
(``net.ipv4.ip_forward``) and masquerades the namespace's traffic, so a workload reaches what
the host reaches. Where ``nft`` is installed the agent's table (``gpupool.agent.firewall``)
also walls the namespaces: nothing opens a connection into one but root on the host and the
clients of a service replica's published port (``publish``). Without ``nft``, ``iptables``
masquerades and there is no wall; without either, the namespace reaches the host's own
addresses only. ``describe()`` says which.

Namespaces are made with ``ip netns add gpupool-<id>`` (kept in ``/run/netns``) when a
tenant's first workload starts on the node and kept for the next ones; ``<id>`` hashes the
agent's scope (two agents on one host, as under ``gpupool up``, never share one) and the
tenant; which /30 each uses is kept host-wide in ``/run/gpupool/netns.json`` under a file lock
(``/run`` is cleared at boot, like the namespaces themselves).
"""

import hashlib
import shutil
import subprocess
import threading
import time
from pathlib import Path

from gpupool.agent.firewall import Firewall, FirewallError, Published
from gpupool.agent.host_registry import locked_json
from gpupool.agent.replica_ports import CONTROL, SERVE, NoPortError, ReplicaPorts

SUBNET = "10.231"
INSTALL_NFT = "Debian/Ubuntu: apt-get install nftables"
REGISTRY = Path("/run/gpupool/netns.json")
MAX_NAMESPACES = 16_000  # /30s in 10.231.0.0/16 (N = index: third and fourth octets)


class NetnsError(Exception):
    """The tenant's namespace cannot be made; the workload does not start."""


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()[:300]}")


def _octets(index: int) -> tuple[int, int]:
    """The /30 of ``index``: 10.231.A.B with B a multiple of 4."""
    return index // 64, (index % 64) * 4


class TenantNetworks:
    def __init__(self, scope: str, registry: Path = REGISTRY, ports: ReplicaPorts | None = None):
        self.scope = scope
        self.ip = shutil.which("ip")
        self.firewall = Firewall(scope)
        self.nat = self.firewall.nft or shutil.which("iptables")
        self.registry = registry
        self.ports = ports or ReplicaPorts(scope)
        self._lock = threading.Lock()
        self._mine: set[str] = set()
        self._applied: frozenset[Published] | None = None
        self._due = 0.0  # when the next quarantine ends (the table changes then)

    def _locked_registry(self):
        return locked_json(self.registry)

    @property
    def available(self) -> bool:
        return self.ip is not None and Path("/proc/self/ns/net").exists()

    @property
    def walled(self) -> bool:
        """Namespaces are walled from each other and replicas' ports can be published."""
        return self.available and self.firewall.available

    def not_walled(self) -> str | None:
        """Why namespaces are not walled here — and service replicas cannot run, as their
        ports are published through the wall — or None."""
        if not self.available:
            return "the ip command is missing (Debian/Ubuntu: apt-get install iproute2)"
        if not self.firewall.available:
            return f"nft is missing ({INSTALL_NFT})"
        return None

    def describe(self) -> str:
        if not self.available:
            return (
                "no per-tenant network namespaces (the ip command is missing); service "
                "replicas cannot run here"
            )
        if self.walled:
            return "a network namespace per tenant, walled from the others (nftables)"
        nat = "NAT through iptables" if self.nat else "no NAT (nft/iptables missing)"
        return (
            f"a network namespace per tenant, NOT walled from the others (nft missing; {nat}); "
            f"service replicas cannot run here ({INSTALL_NFT})"
        )

    def name(self, tenant: str) -> str:
        return "gpupool-" + hashlib.sha256(f"{self.scope}\0{tenant}".encode()).hexdigest()[:10]

    def ensure(self, tenant: str) -> str:
        """The tenant's namespace file (``/run/netns/NAME``), made on first use."""
        name = self.name(tenant)
        path = Path("/run/netns") / name
        with self._lock, self._locked_registry() as known:
            if path.exists() and name in known:
                self._mine.add(name)
                return str(path)
            index = known.get(name)
            if index is None:
                used = set(known.values())
                index = next(i for i in range(1, MAX_NAMESPACES) if i not in used)
            self._make(name, int(index))
            known[name] = int(index)
            self._mine.add(name)
        if self.walled and self._applied is None:
            self.refresh()  # the wall, before the first workload of this agent starts
        return str(path)

    def address(self, tenant: str) -> str:
        """The namespace's own address (10.231.N.2)."""
        with self._lock, self._locked_registry() as known:
            a, b = _octets(int(known[self.name(tenant)]))
        return f"{SUBNET}.{a}.{b + 2}"

    def publish(self, tenant: str, alloc_id: int) -> tuple[str, int, str]:
        """A port for the allocation's service replica, forwarded from every address of the
        node into the tenant's namespace, and its control port, never forwarded (only root
        on the host reaches into the namespace: the agent); returns the namespace's file,
        the port and where the agent reaches the control endpoints (``address:port``)."""
        if not self.walled:
            raise NetnsError(
                "a service replica's port is published into its tenant's namespace by "
                "nftables, which is not installed on this node (apt-get install nftables)"
            )
        path = self.ensure(tenant)
        address = self.address(tenant)
        try:
            port = self.ports.claim(alloc_id, address)
            control = self.ports.claim(alloc_id, address, CONTROL)
            self.refresh()
        except (NoPortError, FirewallError) as exc:
            self.ports.release(alloc_id)
            raise NetnsError(str(exc)) from None
        return path, port, f"{address}:{control}"

    def refresh(self, *, when_due: bool = False) -> None:
        """Apply the table again if the ports it publishes changed; ``when_due``: only once a
        quarantine has ended (what the agent's rounds ask, so an idle agent reads nothing)."""
        if not self.walled or (when_due and time.time() < self._due):
            return
        held = self.ports.held()
        want = frozenset(
            Published(h.port, h.address) for h in held if h.address is not None and h.kind == SERVE
        )
        ends = [h.released_at + self.ports.quarantine_s for h in held if h.released_at]
        self._due = min(ends, default=float("inf"))
        # an agent with no namespace and nothing published has nothing to wall: its table
        # waits for its first namespace (1,000 embedded agents each ran nft at their start)
        if want != self._applied and (want or self._mine or self._applied is not None):
            self.firewall.apply(want)
            self._applied = want

    def _make(self, name: str, index: int) -> None:
        if self.ip is None:
            raise NetnsError("cannot isolate the tenant's network: the ip command is missing")
        a, b = _octets(index)
        host_if, host_ip, inner_ip = (
            f"gpn-{name[8:18]}",
            f"{SUBNET}.{a}.{b + 1}",
            f"{SUBNET}.{a}.{b + 2}",
        )
        if not (Path("/run/netns") / name).exists():
            _run(self.ip, "netns", "add", name)
        _run(self.ip, "-n", name, "link", "set", "lo", "up")
        subprocess.run([self.ip, "link", "del", host_if], capture_output=True, check=False)
        _run(self.ip, "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", name)
        _run(self.ip, "addr", "add", f"{host_ip}/30", "dev", host_if)
        _run(self.ip, "link", "set", host_if, "up")
        # clients on the host's loopback reach published replica ports (the firewall drops
        # what a namespace sends to 127/8, so this opens nothing the other way)
        Path(f"/proc/sys/net/ipv4/conf/{host_if}/route_localnet").write_text("1\n")
        _run(self.ip, "-n", name, "addr", "add", f"{inner_ip}/30", "dev", "eth0")
        _run(self.ip, "-n", name, "link", "set", "eth0", "up")
        _run(self.ip, "-n", name, "route", "add", "default", "via", host_ip)
        self._forward(f"{inner_ip}/32")

    def _forward(self, source: str) -> None:
        try:
            Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        except OSError:
            return
        if self.firewall.available or self.nat is None:
            return  # the agent's table masquerades every namespace
        subprocess.run(
            [self.nat, "-t", "nat", "-A", "POSTROUTING", "-s", source, "-j", "MASQUERADE"],
            capture_output=True,
        )

    def remove_all(self) -> None:
        """Delete the namespaces this agent made or used (tests; an operator's clean-up)."""
        with self._lock, self._locked_registry() as known:
            for name in self._mine:
                subprocess.run([self.ip or "ip", "netns", "del", name], capture_output=True)
                subprocess.run(
                    [self.ip or "ip", "link", "del", f"gpn-{name[8:18]}"], capture_output=True
                )
                known.pop(name, None)
            self._mine.clear()
        self.ports.release_all_but(set())
        self.firewall.remove()
        self._applied = None
