"""The node's packet rules for tenants' network namespaces, as one nftables table per agent:
rendered from what the agent holds (``render``, pure), then applied whole and at once
(``nft -f``: the table is replaced atomically, so a rule is never half there).

What the rules do (``gpn-*`` are the host ends of the namespaces' veth pairs):

- **NAT out**: what leaves a namespace for anywhere but another namespace is masqueraded, so
  a workload reaches what the host reaches.
- **The wall**: nothing enters a namespace unless it answers a connection the namespace made,
  or it was addressed to a port the agent published for a service replica. Another tenant's
  namespace on this node, another node, a job on the host network (as its tenant's user) —
  none of them can open a connection into a namespace, whatever the workload listens on
  (``0.0.0.0`` included). Only root on the host (the agent) may.
- **Published replica ports**: ``node-address:PORT`` (any of the node's own addresses,
  loopback included) is forwarded to ``namespace:PORT`` — before any socket on the host sees
  it, so a process of another tenant that binds the same port on the host network never
  receives a connection meant for the replica. Loopback clients need ``route_localnet`` on
  the namespace's link (set by ``netns``); packets from a namespace to 127/8 are dropped so
  that setting opens nothing.

Tables of several agents on one host (``gpupool up``) hold the same wall; a packet any table
drops stays dropped, so they agree.
"""

import hashlib
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

LINK_PREFIX = "gpn-"


class FirewallError(Exception):
    """The rules could not be applied (``nft`` missing or refusing them)."""


@dataclass(frozen=True, slots=True)
class Published:
    port: int
    address: str  # the namespace's address the port is forwarded to


def table_name(scope: str) -> str:
    return "gpupool-" + hashlib.sha256(scope.encode()).hexdigest()[:10]


def render(table: str, published: Iterable[Published]) -> str:
    """The agent's whole table as an ``nft -f`` script, ``published`` its replicas' ports."""
    wild = f'"{LINK_PREFIX}*"'
    dnat = [
        f"fib daddr type local tcp dport {p.port} dnat to {p.address}:{p.port}"
        for p in sorted(published, key=lambda p: p.port)
    ]
    chains = {
        "publish_in": ("nat hook prerouting priority dstnat", dnat),
        "publish_local": ("nat hook output priority -100", dnat),
        "out_nat": (
            "nat hook postrouting priority srcnat",
            [
                f"iifname {wild} oifname != {wild} masquerade",
                f"oifname {wild} ip saddr 127.0.0.0/8 masquerade",
            ],
        ),
        "no_loopback_from_tenants": (
            "filter hook prerouting priority -300",
            [f"iifname {wild} ip daddr 127.0.0.0/8 drop"],
        ),
        "wall": (
            "filter hook forward priority filter",
            [
                f"oifname {wild} ct status dnat accept",
                f"oifname {wild} ct state established,related accept",
                f"oifname {wild} drop",
            ],
        ),
        "wall_host": (
            "filter hook output priority filter",
            [
                f"oifname {wild} ct status dnat accept",
                f"oifname {wild} ct state established,related accept",
                f"oifname {wild} meta skuid 0 accept",
                f"oifname {wild} meta skuid != 0 drop",
            ],
        ),
    }
    lines = [f"table ip {table} {{}}", f"delete table ip {table}", f"table ip {table} {{"]
    for name, (hook, rules) in chains.items():
        lines.append(f"  chain {name} {{")
        lines.append(f"    type {hook}; policy accept;")
        lines += [f"    {rule}" for rule in rules]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


class Firewall:
    """Applies an agent's table; ``available`` says whether this node can have the wall."""

    def __init__(self, scope: str):
        self.table = table_name(scope)
        self.nft = shutil.which("nft")

    @property
    def available(self) -> bool:
        return self.nft is not None

    def apply(self, published: Iterable[Published]) -> None:
        if self.nft is None:
            raise FirewallError("nft is not installed (apt-get install nftables)")
        script = render(self.table, published)
        done = subprocess.run(
            [self.nft, "-f", "-"], input=script, capture_output=True, text=True, timeout=20
        )
        if done.returncode != 0:
            raise FirewallError(f"nft: {(done.stderr or done.stdout).strip()[:300]}")

    def remove(self) -> None:
        if self.nft is not None:
            subprocess.run(
                [self.nft, "delete", "table", "ip", self.table], capture_output=True, timeout=20
            )
