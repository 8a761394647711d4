"""metering in closed intervals: how far each live allocation is metered

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 15:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("metered_until", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("metered_until")
