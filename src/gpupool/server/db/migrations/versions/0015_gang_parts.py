"""a gang's parts: when each node's part started; which agent runs a node; the leader's
proof of life; gangs one worker a node

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06 06:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocation_nodes") as batch:
        batch.add_column(sa.Column("started_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("ended_at", sa.Float(), nullable=True))
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("instance", sa.String(length=100), nullable=True))
    with op.batch_alter_table("scheduler_meta") as batch:
        batch.add_column(
            sa.Column("leader_seen_at", sa.Float(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("one_per_node", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("one_per_node")
    with op.batch_alter_table("scheduler_meta") as batch:
        batch.drop_column("leader_seen_at")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("instance")
    with op.batch_alter_table("allocation_nodes") as batch:
        batch.drop_column("ended_at")
        batch.drop_column("started_at")
