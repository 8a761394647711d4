"""alerts (one mechanism for operations and billing), budgets, invoice credits

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 16:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=True),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("resolved_at", sa.Float(), nullable=True),
        sa.Column("notified", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key", name="uq_alerts_key"),
    )
    op.create_index("ix_alerts_state", "alerts", ["state"])
    op.create_table(
        "budgets",
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("monthly_fen", sa.BigInteger(), nullable=False),
        sa.Column("thresholds", sa.JSON(), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.ForeignKeyConstraint(["tenant"], ["tenants.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant"),
    )
    op.create_table(
        "credits",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("amount_fen", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["tenant"], ["tenants.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_credits_tenant", "credits", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_credits_tenant", table_name="credits")
    op.drop_table("credits")
    op.drop_table("budgets")
    op.drop_index("ix_alerts_state", table_name="alerts")
    op.drop_table("alerts")
