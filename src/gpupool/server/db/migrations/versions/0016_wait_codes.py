"""why a pending job waits, as a code (quota, no-room, ...) beside the words

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 07:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("wait_code", sa.String(length=20), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("wait_code")
