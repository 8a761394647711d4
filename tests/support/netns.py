"""Hosts for multi-host tests: Linux network namespaces the test creates, joined by a bridge
in a namespace of their own (the switch), with private addresses that exist only inside them.
A host's link is cut and healed at its switch port, as a pulled cable: nothing is refused,
packets just stop. The test process reaches a host's port through a forwarder on loopback
(``Forward``), since the root namespace gets no address of theirs. Everything is removed on
close, processes inside included."""

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from gpupool.server.process import free_port

SUBNET = "10.213.77"  # inside the test's namespaces only
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass
class Host:
    role: str
    netns: str
    address: str
    port: str  # its switch port (the cable)


@dataclass
class Network:
    """A switch and hosts on it; ``close`` kills every process in them and removes them."""

    prefix: str = field(default_factory=lambda: f"gpf{os.getpid() % 100000}")
    hosts: dict[str, Host] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.switch = f"{self.prefix}-sw"
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def add(self, role: str) -> Host:
        number = len(self.hosts) + 1
        netns, port, inside = f"{self.prefix}-{role}", f"{self.prefix}p{number}", "eth0"
        _ip("netns", "add", netns)
        _ip("link", "add", port, "type", "veth", "peer", "name", f"{self.prefix}h{number}")
        _ip("link", "set", port, "netns", self.switch)
        _ip("link", "set", f"{self.prefix}h{number}", "netns", netns)
        _ip("-n", netns, "link", "set", f"{self.prefix}h{number}", "name", inside)
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        address = f"{SUBNET}.{number + 1}"
        _ip("-n", netns, "addr", "add", f"{address}/24", "dev", inside)
        _ip("-n", netns, "link", "set", inside, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        self.hosts[role] = host = Host(role, netns, address, port)
        return host

    def cut(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.port, "down")

    def heal(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.port, "up")

    def close(self) -> None:
        for host in self.hosts.values():
            kill_everything_in(host.netns)
        for netns in [*(h.netns for h in self.hosts.values()), self.switch]:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=30)


def kill_everything_in(netns: str) -> None:
    """SIGKILL every process in the namespace (servers, agents and their workloads)."""
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    for pid in out.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def in_netns(host: Host, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", host.netns, *argv]


def connect_in(host: Host, port: int, timeout: float = 5) -> socket.socket:
    """A TCP connection made from inside the host's namespace (this thread enters it for the
    connect only; the socket stays in the namespace it was made in)."""
    with open(f"/run/netns/{host.netns}") as target, open("/proc/thread-self/ns/net") as home:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"cannot enter {host.netns}")
        try:
            return socket.create_connection((host.address, port), timeout=timeout)
        finally:
            _libc.setns(home.fileno(), CLONE_NEWNET)


class Forward:
    """127.0.0.1:<free port> → host:port, made from inside the host's namespace (the test's
    own view, unaffected by cut cables). A refused or failed connect closes the client's."""

    def __init__(self, host: Host, port: int) -> None:
        self.host, self.port = host, port
        self.listener = socket.create_server(("127.0.0.1", free_port()))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = connect_in(self.host, self.port)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for s in (source, sink):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
    source.close()


def spawn(host: Host, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("a") as out:
        return subprocess.Popen(
            in_netns(host, argv), env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
