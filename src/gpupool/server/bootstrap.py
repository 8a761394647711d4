"""What ``gpupool up`` puts in an empty installation: the seed article's three teams with
guarantees (algorithm 20 cards, inference 10, dev/test 10) under one company, an admin token
and a token for the embedded agents (which register the example cluster's 10 servers x 4
A100-80G themselves). Idempotent: a second run on the same data directory changes nothing and
reuses the saved tokens."""

import os
import time
from pathlib import Path

from gpupool.server.auth import create_user_token, principal_for
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import QuotaRow, TenantRow

SERVERS = 10
CARDS = 4
MODEL = "A100-80G"
TEAMS = {"algorithm": 20, "inference": 10, "devtest": 10}
COMPANY = "company"


def seed_example(db: Database) -> None:
    now = time.time()
    with db.write() as s:
        if s.get(TenantRow, COMPANY) is None:
            s.add(TenantRow(name=COMPANY, parent=None, weight=1.0, created_at=now))
            s.flush()
            for team, cards in TEAMS.items():
                s.add(TenantRow(name=team, parent=COMPANY, weight=1.0, created_at=now))
                s.flush()
                s.add(QuotaRow(tenant=team, resource="gpu", nominal=cards * 100))


def saved_token(
    db: Database, path: Path, user: str = "admin", role: str = "admin", node: str | None = None
) -> str:
    """The token saved at ``path`` if it still works, else a new one saved there (0600)."""
    if path.is_file():
        saved = path.read_text().strip()
        with db.read() as s:
            if saved and principal_for(s, saved) is not None:
                return saved
    with db.write() as s:
        token = create_user_token(s, user, role, None, node)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token
