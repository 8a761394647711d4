"""metering in closed intervals (how far each live allocation is metered); the price catalog;
rental plans

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
        batch.add_column(
            sa.Column("idle_pct_seconds", sa.BigInteger(), server_default="0", nullable=False)
        )
    op.create_table(
        "prices",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("monthly_fen", sa.BigInteger(), nullable=False),
        sa.Column("hourly_fen", sa.BigInteger(), nullable=True),
        sa.Column("effective_from", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_prices_model", "prices", ["model"])
    op.create_table(
        "rental_plans",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("cards", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("periods", sa.Integer(), nullable=False),
        sa.Column("start", sa.Float(), nullable=False),
        sa.Column("end", sa.Float(), nullable=False),
        sa.Column("total_fen", sa.BigInteger(), nullable=False),
        sa.Column("cancelled_at", sa.Float(), nullable=True),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["tenant"], ["tenants.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_rental_plans_tenant", "rental_plans", ["tenant"])
    op.create_table(
        "tenant_billing",
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("mode", sa.String(length=20), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("task_prices", sa.JSON(), nullable=False),
        sa.Column("discount_pct", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["tenant"], ["tenants.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("tenant"),
    )


def downgrade() -> None:
    op.drop_table("tenant_billing")
    op.drop_index("ix_rental_plans_tenant", table_name="rental_plans")
    op.drop_table("rental_plans")
    op.drop_index("ix_prices_model", table_name="prices")
    op.drop_table("prices")
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("idle_pct_seconds")
        batch.drop_column("metered_until")
