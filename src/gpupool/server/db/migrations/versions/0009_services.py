"""elastic inference services: services, their replicas and their load history

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 05:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "tenant",
            sa.String(length=100),
            sa.ForeignKey("tenants.name", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("image", sa.String(length=500), nullable=True),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("min_replicas", sa.Integer(), nullable=False),
        sa.Column("max_replicas", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("target", sa.Float(), nullable=False),
        sa.Column("utilisation", sa.Float(), nullable=False),
        sa.Column("stable_s", sa.Float(), nullable=False),
        sa.Column("scale_down_delay_s", sa.Float(), nullable=False),
        sa.Column("startup_s", sa.Float(), nullable=False),
        sa.Column("policy", sa.String(length=20), nullable=False),
        sa.Column("health_path", sa.String(length=200), nullable=False),
        sa.Column("pinned", sa.Integer(), nullable=True),
        sa.Column("desired", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("tenant", "name", name="uq_services_tenant_name"),
    )
    op.create_index("ix_services_tenant", "services", ["tenant"])
    op.create_table(
        "service_replicas",
        sa.Column("job_id", BigId, sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column(
            "service_id", BigId, sa.ForeignKey("services.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("endpoint", sa.String(length=300), nullable=True),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("draining_since", sa.Float(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("checked_at", sa.Float(), nullable=True),
        sa.Column("ready_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_service_replicas_service_id", "service_replicas", ["service_id"])
    op.create_table(
        "service_samples",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "service_id", BigId, sa.ForeignKey("services.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("load", sa.Float(), nullable=False),
        sa.Column("ready", sa.Integer(), nullable=False),
        sa.Column("desired", sa.Integer(), nullable=False),
        sa.Column("forecast", sa.Float(), nullable=True),
    )
    op.create_index("ix_service_samples_service_id", "service_samples", ["service_id"])
    op.create_index("ix_service_samples_time", "service_samples", ["time"])


def downgrade() -> None:
    op.drop_index("ix_service_samples_time", "service_samples")
    op.drop_index("ix_service_samples_service_id", "service_samples")
    op.drop_table("service_samples")
    op.drop_index("ix_service_replicas_service_id", "service_replicas")
    op.drop_table("service_replicas")
    op.drop_index("ix_services_tenant", "services")
    op.drop_table("services")
