"""``gpupool admin backup`` and ``restore`` (issue 44) on SQLite and a real PostgreSQL: a
backup taken while a server runs, changes made after it, a restore with the servers stopped
that brings back the state of the backup (what came after is gone), migrated, under a new
restore epoch the agents' orders carry. Refused while a scheduler leads; a file that is not a
backup is named, never a traceback."""

import subprocess
import sys
import time

from sqlalchemy import select, update

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import Meta
from gpupool.server.settings import Settings
from tests.support.cluster import node_body, ok
from tests.support.live import live_server

PY = sys.executable


def _admin(*args: str, url: str) -> subprocess.CompletedProcess:
    cmd = [PY, "-m", "gpupool.cli.main", "admin", *args, "--database-url", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _tenants(server) -> set[str]:
    return {t["name"] for t in ok(server.admin().get("/api/v1/tenants"))["items"]}


def test_a_restore_brings_back_the_backup_under_a_new_epoch(database_url, tmp_path):
    settings = Settings(data_dir=tmp_path, database_url=database_url, log_json=False)
    backup = tmp_path / "backup.db"
    with live_server(settings) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "before"}), 201)
        ok(admin.post("/api/v1/nodes", json=node_body("n1", cards=2)))
        taken = _admin("backup", str(backup), url=database_url)  # while the server runs
        assert taken.returncode == 0, taken.stderr
        ok(admin.post("/api/v1/tenants", json={"name": "after"}), 201)
        assert _tenants(srv) >= {"before", "after"}
        again = _admin("backup", str(backup), url=database_url)
        assert again.returncode == 2 and "exists" in again.stderr  # never overwritten
    done = _admin("restore", str(backup), url=database_url)
    assert done.returncode == 0, done.stderr
    assert "restore epoch" in done.stdout
    with live_server(settings) as srv:
        assert "before" in _tenants(srv) and "after" not in _tenants(srv)
        agent = srv.client(srv.token("agent-n1", "agent", node="n1"))
        orders = ok(agent.get("/api/v1/nodes/n1/orders"))
    assert len(orders["restore_epoch"]) == 32 and orders["restore_epoch"] in done.stdout


def test_a_restore_is_refused_while_a_scheduler_leads(database_url, tmp_path):
    db = Database(database_url)
    db.migrate()
    with db.write() as s:
        s.execute(
            update(Meta)
            .where(Meta.id == 1)
            .values(leader_name="control:41", leader_seen_at=time.time())
        )
        generation = s.execute(select(Meta.generation)).scalar_one()
    db.dispose()
    backup = tmp_path / "backup.db"
    assert _admin("backup", str(backup), url=database_url).returncode == 0
    refused = _admin("restore", str(backup), url=database_url)
    assert refused.returncode == 2
    assert "a scheduler leads on this database: control:41" in refused.stderr
    assert "Traceback" not in refused.stderr
    forced = _admin("restore", str(backup), "--force", url=database_url)
    assert forced.returncode == 0 and f"generation {generation}" in forced.stdout


def test_a_file_that_is_not_a_backup_is_named(database_url, tmp_path):
    Database(database_url).migrate()
    junk = tmp_path / "notes.txt"
    junk.write_text("not a backup\n" * 100)
    r = _admin("restore", str(junk), url=database_url)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(junk) in r.stderr or "pg_restore failed" in r.stderr
    missing = _admin("restore", str(tmp_path / "nowhere"), url=database_url)
    assert missing.returncode == 2 and "no backup at" in missing.stderr
