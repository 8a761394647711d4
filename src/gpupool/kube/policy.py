"""Tenants, quotas and priority classes the Kubernetes-mode scheduler decides with: from its
settings file, or — with ``tenants_from: server`` — from the gpupool server, the state of
record (``GET /api/v1/kubernetes/policy``, re-read with every report), so tenants and
guarantees are managed in one place (``gpupool tenant ...``, ``gpupool quota ...``) — and
reservations (``gpupool reservation ...``) on the cluster's nodes, which the cycle holds as
it does for standalone nodes."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpupool.kube.config import KubeConfig
from gpupool.model import SpecError
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree


@dataclass(frozen=True)
class Policy:
    tenants: tuple[Tenant, ...]
    classes: Mapping[str, int] = field(default_factory=dict)
    reservations: tuple[Reservation, ...] = ()
    # per tenant, what its standalone jobs hold (engine units): charged before each cycle,
    # so a guarantee is one across the pool and the cluster (server.usage_elsewhere)
    usage_elsewhere: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def reservations_on(self, nodes: Iterable[str]) -> list[Reservation]:
        """The reservations as this cluster holds them: each kept to its nodes here (those of
        other clusters and standalone nodes are not this scheduler's to hold)."""
        here = set(nodes)
        out = []
        for r in self.reservations:
            mine = tuple(n for n in r.nodes if n in here)
            if mine:
                out.append(replace(r, nodes=mine))
        return out

    def tree(self) -> TenantTree:
        """A fresh tree: a cycle charges the one it is given (with what the tenants' work
        holds elsewhere already charged)."""
        tree = TenantTree(self.tenants)
        for tenant, used in self.usage_elsewhere.items():
            if tenant in tree.tenants and used:
                tree.charge(tenant, dict(used))
        return tree

    @staticmethod
    def from_config(config: KubeConfig) -> "Policy":
        return Policy(tuple(config.tenant_tree().tenants.values()), dict(config.priority_classes))

    @staticmethod
    def from_server(answer: Mapping[str, Any]) -> "Policy":
        """The server's answer; SpecError when it is not one."""
        try:
            tenants = tuple(
                Tenant(
                    str(t["name"]),
                    t.get("parent"),
                    {str(r): Quota(*q) for r, q in (t.get("quotas") or {}).items()},
                    float(t.get("weight", 1.0)),
                )
                for t in answer["tenants"]
            )
            classes = {str(k): int(v) for k, v in answer["priority_classes"].items()}
            reservations = tuple(
                Reservation(
                    str(r["id"]), str(r["tenant"]), tuple(str(n) for n in r["nodes"]),
                    float(r["start"]), float(r["end"]),
                    None if r.get("cards") is None else int(r["cards"]),
                )
                for r in answer.get("reservations") or []
            )  # fmt: skip
            elsewhere = {
                str(t): {str(k): int(v) for k, v in used.items()}
                for t, used in (answer.get("usage_elsewhere") or {}).items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SpecError(f"the server's tenants are not readable ({exc})") from None
        TenantTree(tenants)  # parents and cycles checked now
        return Policy(tenants, classes, reservations, elsewhere)
