"""pool samples: the dashboard's utilisation history

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 17:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pool_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("cards", sa.Integer(), nullable=False),
        sa.Column("allocated", sa.Integer(), nullable=False),
        sa.Column("util_sum", sa.Float(), nullable=False),
        sa.Column("util_n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_pool_samples_time", "pool_samples", ["time"])


def downgrade() -> None:
    op.drop_index("ix_pool_samples_time", table_name="pool_samples")
    op.drop_table("pool_samples")
