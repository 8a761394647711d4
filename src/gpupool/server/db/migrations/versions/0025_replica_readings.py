"""service replicas read by their agents on their control ports: each replica's last reading
and when it was taken; how far behind each node's agent is (its beats say)

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 06:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("service_replicas") as batch:
        batch.add_column(sa.Column("reading", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("read_at", sa.Float(), nullable=True))
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("agent_lag_s", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("agent_lag_s")
    with op.batch_alter_table("service_replicas") as batch:
        batch.drop_column("read_at")
        batch.drop_column("reading")
