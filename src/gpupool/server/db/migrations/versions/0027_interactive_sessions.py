"""interactive sessions: a job's kind of session ("shell": an allocation whose sandbox takes
terminals through the server, docs/interactive.md)

Revision ID: 0027
Revises: 0025
Create Date: 2026-12-07 09:00:00

Numbered 0027 (another branch adds a 0026): whichever merges second re-chains its
down_revision onto the other's.
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("interactive", sa.String(10), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("interactive")
