"""which node's part of an allocation a usage record meters (null: the whole allocation)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 10:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.add_column(sa.Column("node", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.drop_column("node")
