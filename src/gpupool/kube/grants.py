"""A placement written on pods and read back (pure).

Before binding, each pod gets its grant in the ``gpupool.io/grant`` annotation: node, host CPU
and memory, and per device its index, UUID, compute share, memory, MIG profile and start. The
device plugin reads it in ``Allocate``; a restarted scheduler rebuilds what runs from it, so
nothing is granted twice.

A tenant who may edit its pods may edit their annotations too, so each grant is signed:
``gpupool.io/grant-signature`` is an HMAC-SHA256 over the pod's UID and the grant, keyed by a
secret the scheduler and the device plugin share (a Kubernetes Secret). A grant copied from
another pod, or changed by a byte, does not verify: the device plugin refuses it and the
scheduler evicts a running pod that carries one.
"""

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpupool.model import Node, SpecError
from gpupool.scheduler.types import DeviceGrant, NodeGrant

GRANT_ANNOTATION = "gpupool.io/grant"
JOB_ANNOTATION = "gpupool.io/job"
SIGNATURE_ANNOTATION = "gpupool.io/grant-signature"
KEY_ENV = "GPUPOOL_GRANT_KEY"
MIN_KEY_CHARS = 32
NO_KEY = (
    "no grant key: give --grant-key FILE or set GPUPOOL_GRANT_KEY (deploy/kubernetes mounts "
    "the Secret gpupool-grant-key; docs/kubernetes.md says how to make one)"
)


class UnsignedGrant(SpecError):
    """A grant whose signature does not match: changed, or copied from another pod."""


@dataclass(frozen=True, slots=True)
class GrantKey:
    """The shared secret(s): the first signs, every one verifies (so a key can be rotated:
    add the new one first, restart, and drop the old one once old pods are gone)."""

    keys: tuple[bytes, ...]

    @classmethod
    def generate(cls) -> "GrantKey":
        return cls((secrets.token_hex(32).encode(),))

    @classmethod
    def parse(cls, text: str, where: str) -> "GrantKey":
        keys = tuple(line.strip().encode() for line in text.splitlines() if line.strip())
        if not keys:
            raise SpecError(f"{where}: no key in it")
        short = [n for n, k in enumerate(keys, 1) if len(k) < MIN_KEY_CHARS]
        if short:
            raise SpecError(
                f"{where}: key on line {short[0]} is shorter than {MIN_KEY_CHARS} characters "
                "(make one with: openssl rand -hex 32)"
            )
        return cls(keys)

    @classmethod
    def load(cls, path: str | None = None) -> "GrantKey":
        """From ``path`` (one key per line), else from $GPUPOOL_GRANT_KEY."""
        if path:
            try:
                return cls.parse(Path(path).read_text(), path)
            except OSError as exc:
                raise SpecError(f"{path}: cannot read the grant key ({exc.strerror})") from None
        if os.environ.get(KEY_ENV):
            return cls.parse(os.environ[KEY_ENV], KEY_ENV)
        raise SpecError(NO_KEY)

    def _mac(self, key: bytes, uid: str, raw: str) -> str:
        return hmac.new(key, f"{uid}\n{raw}".encode(), hashlib.sha256).hexdigest()

    def sign(self, uid: str, raw: str) -> str:
        return self._mac(self.keys[0], uid, raw)

    def verifies(self, uid: str, raw: str, signature: str) -> bool:
        return any(hmac.compare_digest(self._mac(k, uid, raw), signature) for k in self.keys)


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


def grant_of(pod: Mapping[str, Any], key: GrantKey) -> tuple[str, str, NodeGrant] | None:
    """The pod's grant; None when it has none; SpecError when it is not one or its signature
    does not match (changed, or copied from another pod)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    raw = annotations.get(GRANT_ANNOTATION)
    if raw is None:
        return None
    if not key.verifies(str(meta.get("uid", "")), raw, str(annotations.get(SIGNATURE_ANNOTATION))):
        raise UnsignedGrant(
            f"annotation {GRANT_ANNOTATION}: its {SIGNATURE_ANNOTATION} does not match "
            "(changed after gpupool wrote it, or copied from another pod)"
        )
    return read_grant(raw)


def signed(key: GrantKey, uid: str, raw: str) -> dict[str, str]:
    """The annotations that grant ``raw`` to the pod ``uid``."""
    return {GRANT_ANNOTATION: raw, SIGNATURE_ANNOTATION: key.sign(uid, raw)}
