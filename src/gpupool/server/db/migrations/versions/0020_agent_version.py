"""the version of the agent that registered each node (version skew is shown and judged)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 16:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("agent_version", sa.String(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("agent_version")
