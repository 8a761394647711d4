"""What ``gpupool up`` puts in an empty installation: the seed article's example cluster
(10 servers x 4 A100-80G) and its three teams with guarantees (algorithm 20 cards,
inference 10, dev/test 10) under one company, and an admin token. Idempotent: a second run
on the same data directory changes nothing and reuses the saved token."""

import os
import time
from pathlib import Path

from sqlalchemy import select

from gpupool.server.auth import create_user_token, principal_for
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import NodeRow, QuotaRow, TenantRow
from gpupool.server.routes.nodes import register_node
from gpupool.server.schemas import DeviceIn, NodeIn

SERVERS = 10
CARDS = 4
MODEL = "A100-80G"
TEAMS = {"algorithm": 20, "inference": 10, "devtest": 10}
COMPANY = "company"


def seed_example(db: Database) -> None:
    now = time.time()
    with db.write() as s:
        if s.execute(select(NodeRow.name).limit(1)).first() is None:
            for i in range(1, SERVERS + 1):
                name = f"node-{i:02d}"
                devices = [
                    DeviceIn(index=d, model=MODEL, uuid=f"GPU-sim-{name}-{d}", island=0)
                    for d in range(CARDS)
                ]
                body = NodeIn(
                    name=name,
                    cpu_millis=64_000,
                    memory_mib=512 * 1024,
                    devices=devices,
                    labels={"simulated": "true"},
                )
                register_node(s, body, now)
        if s.get(TenantRow, COMPANY) is None:
            s.add(TenantRow(name=COMPANY, parent=None, weight=1.0, created_at=now))
            s.flush()
            for team, cards in TEAMS.items():
                s.add(TenantRow(name=team, parent=COMPANY, weight=1.0, created_at=now))
                s.flush()
                s.add(QuotaRow(tenant=team, flavour="gpu", nominal=cards * 100))


def admin_token(db: Database, path: Path) -> str:
    """The token saved at ``path`` if it still works, else a new one saved there (0600)."""
    if path.is_file():
        saved = path.read_text().strip()
        with db.read() as s:
            if saved and principal_for(s, saved) is not None:
                return saved
    with db.write() as s:
        token = create_user_token(s, "admin", "admin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token
