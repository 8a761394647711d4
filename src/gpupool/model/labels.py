"""Node labels with a meaning to gpupool itself."""

import ipaddress
import re

from gpupool.model.errors import SpecError

# where a node's workloads are reached over the network (service replicas' endpoints); a node
# without it is reached by its name
ADDRESS_LABEL = "gpupool.io/address"
# set by agents that look at their service replicas on the replicas' control ports and send
# what they find (``agent.replica_watch``); the server probes replicas on other nodes itself
REPLICA_CONTROL_LABEL = "gpupool.io/replica-control"
# whether a node's agent can run service replicas: "yes", or "no: why" (a root agent without
# nft cannot publish their ports into their tenant's walled namespace); a node without it
# (an older agent) is taken to run them
REPLICAS_LABEL = "gpupool.io/replicas"
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def check_address(value: str) -> str:
    """An address label is a host: an IPv4 or IPv6 address or a DNS name — never a port, a
    path or credentials (the leader's health checks build URLs from it)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    name = value[:-1] if value.endswith(".") else value
    if 0 < len(name) <= 253 and all(_HOST_LABEL.fullmatch(p) for p in name.split(".")):
        return value
    raise SpecError(
        f"labels.{ADDRESS_LABEL}: {value[:80]!r} is not an IP address or a host name",
        field="labels",
    )


def host_port(host: str, port: int) -> str:
    """``host:port`` for a URL (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
