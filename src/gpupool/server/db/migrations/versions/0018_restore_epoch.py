"""the database's restore epoch: changed by every restore from a backup

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 10:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scheduler_meta") as batch:
        batch.add_column(
            sa.Column("restore_epoch", sa.String(length=32), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduler_meta") as batch:
        batch.drop_column("restore_epoch")
