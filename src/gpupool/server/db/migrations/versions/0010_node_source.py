"""where a node comes from: its own agent, or a Kubernetes cluster gpupool schedules

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 08:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(
            sa.Column("source", sa.String(length=20), nullable=False, server_default="agent")
        )


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("source")
