"""jobs that save on a signal (the seconds-fast vacate) and the work preemption cost them

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 22:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("checkpoint", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("lost_gpu_s", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lost_gpu_s")
        batch.drop_column("checkpoint")
