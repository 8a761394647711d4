"""A placement as JSON: the form the server stores, sends to agents in orders, and the
Kubernetes ledger reports for the pods it bound (one format, no database needed to make it)."""

from typing import Any

from gpupool.scheduler.types import DeviceGrant, NodeGrant, Placement


def placement_to_json(p: Placement) -> dict[str, Any]:
    return {
        "policy": p.policy,
        "nodes": [
            {
                **({"whole": True} if n.whole else {}),  # stored as before otherwise
                "node": n.node,
                "cpu_millis": n.cpu_millis,
                "mem_mib": n.mem_mib,
                "devices": [
                    {
                        "device": d.device,
                        "compute_pct": d.compute_pct,
                        "mem_mib": d.mem_mib,
                        "exclusive": d.exclusive,
                        "mig_profile": d.mig_profile,
                        "mig_start": d.mig_start,
                    }
                    for d in n.devices
                ],
            }
            for n in p.nodes
        ],
    }


def placement_from_json(job_id: str, data: dict[str, Any]) -> Placement:
    nodes = tuple(
        NodeGrant(
            node=n["node"],
            cpu_millis=n["cpu_millis"],
            mem_mib=n["mem_mib"],
            devices=tuple(DeviceGrant(node=n["node"], **d) for d in n["devices"]),
            whole=bool(n.get("whole", False)),
        )
        for n in data["nodes"]
    )
    return Placement(job_id=job_id, nodes=nodes, policy=data.get("policy", ""))
