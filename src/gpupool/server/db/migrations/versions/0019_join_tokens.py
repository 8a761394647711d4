"""bootstrap tokens that new GPU servers trade for their node credential (gpupool join)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 13:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "join_tokens",
        sa.Column("id", BIG_ID, primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("uses_left", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(length=200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("join_tokens")
