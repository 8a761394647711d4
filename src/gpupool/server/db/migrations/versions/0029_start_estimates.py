"""start-time estimates: each pending job's estimated start, nodes and basis from the leader's
last plan (docs/fair-share-and-estimates.md)

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07 12:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "start_estimates",
        sa.Column(
            "job_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("start", sa.Float(), nullable=True),
        sa.Column("nodes", sa.JSON(), nullable=False),
        sa.Column("basis", sa.Text(), nullable=False),
        sa.Column("computed_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("start_estimates")
