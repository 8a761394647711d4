"""A placement written on pods and read back (pure).

Before binding, each pod gets its grant in the ``gpupool.io/grant`` annotation: node, host CPU
and memory, and per device its index, UUID, compute share, memory, MIG profile and start. The
device plugin reads it in ``Allocate``; a restarted scheduler rebuilds what runs from it, so
nothing is granted twice.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpupool.model import Node, SpecError
from gpupool.scheduler.types import DeviceGrant, NodeGrant, Placement

GRANT_ANNOTATION = "gpupool.io/grant"
JOB_ANNOTATION = "gpupool.io/job"


def grant_json(job_id: str, piece: NodeGrant, node: Node | None, policy: str) -> str:
    uuids = {d.index: d.uuid for d in node.devices} if node is not None else {}
    return json.dumps(
        {
            "job": job_id,
            "node": piece.node,
            "cpu_millis": piece.cpu_millis,
            "mem_mib": piece.mem_mib,
            "policy": policy,
            "devices": [
                {
                    "index": d.device,
                    "uuid": uuids.get(d.device, ""),
                    "compute_pct": d.compute_pct,
                    "mem_mib": d.mem_mib,
                    "exclusive": d.exclusive,
                    "mig_profile": d.mig_profile,
                    "mig_start": d.mig_start,
                }
                for d in piece.devices
            ],
        },
        separators=(",", ":"),
    )


def read_grant(raw: str) -> tuple[str, str, NodeGrant]:
    """(job id, policy, the node grant) from an annotation; SpecError when it is not one."""
    try:
        g = json.loads(raw)
        piece = NodeGrant(
            node=str(g["node"]),
            cpu_millis=int(g["cpu_millis"]),
            mem_mib=int(g["mem_mib"]),
            devices=tuple(
                DeviceGrant(
                    node=str(g["node"]),
                    device=int(d["index"]),
                    compute_pct=int(d["compute_pct"]),
                    mem_mib=int(d["mem_mib"]),
                    exclusive=bool(d.get("exclusive", False)),
                    mig_profile=d.get("mig_profile"),
                    mig_start=d.get("mig_start"),
                )
                for d in g["devices"]
            ),
        )
        return str(g["job"]), str(g.get("policy", "")), piece
    except (ValueError, TypeError, KeyError) as exc:
        raise SpecError(f"annotation {GRANT_ANNOTATION}: not a grant ({exc})") from None


def grant_of(pod: Mapping[str, Any]) -> tuple[str, str, NodeGrant] | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(GRANT_ANNOTATION)
    return None if raw is None else read_grant(raw)


def placement_of(job_id: str, pieces: Sequence[NodeGrant], policy: str) -> Placement:
    return Placement(job_id, tuple(pieces), policy)
