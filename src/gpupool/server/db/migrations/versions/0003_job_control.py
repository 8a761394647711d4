"""job control: holds, dependencies, arrays, output patterns; drain reasons

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("held", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch.add_column(
            sa.Column("dependency", sa.JSON(), server_default=sa.text("'[]'"), nullable=False)
        )
        batch.add_column(sa.Column("array_job", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("array_limit", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("output", sa.String(length=500), nullable=True))
        batch.create_index("ix_jobs_array_job", ["array_job"])
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("drain_reason", sa.Text(), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("drain_reason")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_array_job")
        for column in ("output", "array_limit", "array_index", "array_job", "dependency", "held"):
            batch.drop_column(column)
