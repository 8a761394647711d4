"""idle culling of interactive sessions (docs/interactive.md, "Idle culling"): a tenant's idle
policy, and per allocation when its cards last showed activity, when a person last typed into
or opened one of its terminals, and when it was warned of its release and for when

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07 12:00:00

A branch that adds another 0028 re-chains its down_revision onto this one.
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

COLUMNS = ("active_at", "input_at", "idle_warned_at", "idle_release_at")


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("idle_policy", sa.JSON(), nullable=False, server_default="{}"))
    with op.batch_alter_table("allocations") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    # not a batch: on SQLite it would rebuild the tables, and dropping the old ones deletes
    # what references them (their foreign keys cascade). SQLite 3.35+ drops a column in place.
    for name in COLUMNS:
        op.drop_column("allocations", name)
    op.drop_column("tenants", "idle_policy")
