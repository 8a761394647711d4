"""advisory mode: actions the scheduler proposes instead of taking, and the proposals

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 02:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "advisory_actions",
        sa.Column("action", sa.String(length=20), primary_key=True),
        sa.Column("changed_by", sa.String(length=100), nullable=False),
        sa.Column("changed_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "proposals",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("job_id", _ID, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=True),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("gain", sa.Text(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("decided_by", sa.String(length=100), nullable=False),
        sa.Column("decided_at", sa.Float(), nullable=True),
        sa.Column("done_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_proposals_job_id", "proposals", ["job_id"])
    op.create_index("ix_proposals_state", "proposals", ["state"])
    op.create_index("ix_proposals_subject", "proposals", ["subject"])


def downgrade() -> None:
    op.drop_table("proposals")
    op.drop_table("advisory_actions")
