"""One network namespace per tenant on this node, shared by that tenant's workloads: their
loopback (127.0.0.1 listeners) and abstract UNIX sockets are the tenant's alone — another
tenant's job on the same node neither sees nor reaches them.

Each namespace gets a veth pair to the host: ``gpn-<id>`` on the host with 10.231.N.1/30, and
``eth0`` inside with 10.231.N.2/30 and the default route through the host; the host forwards
(``net.ipv4.ip_forward``) and masquerades the namespace's traffic when ``nft`` or
``iptables`` is installed, so a workload reaches what the host reaches. Without either the
namespace reaches the host's own addresses only, and ``describe()`` says so.

Namespaces are made with ``ip netns add gpupool-<id>`` (kept in ``/run/netns``) when a
tenant's first workload starts on the node and kept for the next ones; ``<id>`` hashes the
agent's scope (two agents on one host, as under ``gpupool up``, never share one) and the
tenant; which /30 each uses is kept host-wide in ``/run/gpupool/netns.json`` under a file lock
(``/run`` is cleared at boot, like the namespaces themselves).
"""

import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
import threading
from pathlib import Path

SUBNET = "10.231"
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
    def __init__(self, scope: str, registry: Path = REGISTRY):
        self.scope = scope
        self.ip = shutil.which("ip")
        self.nat = shutil.which("nft") or shutil.which("iptables")
        self.registry = registry
        self._lock = threading.Lock()
        self._mine: set[str] = set()

    @contextlib.contextmanager
    def _locked_registry(self):
        self.registry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.registry.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                known = json.loads(self.registry.read_text()) if self.registry.exists() else {}
            except ValueError:
                known = {}
            yield known
            self.registry.write_text(json.dumps(known))

    @property
    def available(self) -> bool:
        return self.ip is not None and Path("/proc/self/ns/net").exists()

    def describe(self) -> str:
        if not self.available:
            return "no per-tenant network namespaces (the ip command is missing)"
        nat = "with NAT to the host's networks" if self.nat else "no NAT (nft/iptables missing)"
        return f"a network namespace per tenant ({nat})"

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
        return str(path)

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
        _run(self.ip, "-n", name, "addr", "add", f"{inner_ip}/30", "dev", "eth0")
        _run(self.ip, "-n", name, "link", "set", "eth0", "up")
        _run(self.ip, "-n", name, "route", "add", "default", "via", host_ip)
        self._forward(f"{inner_ip}/32")

    def _forward(self, source: str) -> None:
        try:
            Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        except OSError:
            return
        if self.nat is None:
            return
        if self.nat.endswith("nft"):
            subprocess.run([self.nat, "add", "table", "ip", "gpupool"], capture_output=True)
            subprocess.run(
                [
                    self.nat,
                    "add chain ip gpupool post { type nat hook postrouting priority 100 ; }",
                ],
                capture_output=True,
            )
            subprocess.run(
                [self.nat, f"add rule ip gpupool post ip saddr {source} masquerade"],
                capture_output=True,
            )
        else:
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
