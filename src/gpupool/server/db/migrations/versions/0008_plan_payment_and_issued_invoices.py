"""plans paid upfront or monthly; invoices issued per tenant and month, draft then final;
jobs' --error, --chdir and submit directory (sbatch)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 02:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("error", sa.String(length=500), nullable=True))
        batch.add_column(sa.Column("chdir", sa.Text(), nullable=True))
        batch.add_column(sa.Column("submit_dir", sa.Text(), nullable=True))
    with op.batch_alter_table("rental_plans") as batch:
        batch.add_column(
            sa.Column("payment", sa.String(length=10), nullable=False, server_default="monthly")
        )
    op.create_table(
        "issued_invoices",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "tenant",
            sa.String(length=100),
            sa.ForeignKey("tenants.name", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("number", sa.String(length=40), nullable=True, unique=True),
        sa.Column("total_fen", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("issued_by", sa.String(length=100), nullable=False),
        sa.Column("issued_at", sa.Float(), nullable=False),
        sa.Column("finalised_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("tenant", "month", name="uq_issued_invoices_tenant_month"),
    )
    op.create_index("ix_issued_invoices_tenant", "issued_invoices", ["tenant"])
    op.create_index("ix_issued_invoices_month", "issued_invoices", ["month"])


def downgrade() -> None:
    op.drop_index("ix_issued_invoices_month", "issued_invoices")
    op.drop_index("ix_issued_invoices_tenant", "issued_invoices")
    op.drop_table("issued_invoices")
    with op.batch_alter_table("rental_plans") as batch:
        batch.drop_column("payment")
    with op.batch_alter_table("jobs") as batch:
        for column in ("submit_dir", "chdir", "error"):
            batch.drop_column(column)
