"""change notifications: on PostgreSQL, commits that move the change feed's stamp notify
the API processes (``gpupool_changes``) instead of being polled for

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05 05:30:00
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# what the change feed's stamp reads (server/change_feed.py: STAMP): the allocation
# generation and nodes_version of scheduler_meta, and the newest job event. pg_notify in a
# transaction is delivered once, at commit, however many statements fired it.
FUNCTION = """
CREATE OR REPLACE FUNCTION gpupool_notify_change() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('gpupool_changes', '');
    RETURN NULL;
END
$$ LANGUAGE plpgsql
"""
TRIGGERS = {
    "gpupool_meta_changed": "AFTER UPDATE OF generation, nodes_version ON scheduler_meta",
    "gpupool_job_event_added": "AFTER INSERT ON job_events",
}
TABLES = {"gpupool_meta_changed": "scheduler_meta", "gpupool_job_event_added": "job_events"}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite: one file, polled cheaply (no notifications there)
    op.execute(FUNCTION)
    for name, when in TRIGGERS.items():
        op.execute(
            f"CREATE TRIGGER {name} {when} FOR EACH STATEMENT "
            "EXECUTE FUNCTION gpupool_notify_change()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table in TABLES.items():
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS gpupool_notify_change()")
