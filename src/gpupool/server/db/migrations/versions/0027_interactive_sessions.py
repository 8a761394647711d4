"""interactive sessions: a job's kind of session ("shell": an allocation whose sandbox takes
terminals through the server, docs/interactive.md)

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 09:00:00

After main's 0026 (slurm placement); a branch that adds another 0026 or 0027 re-chains its
down_revision onto this one.
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("interactive", sa.String(10), nullable=True))


def downgrade() -> None:
    # not a batch: on SQLite it would rebuild "jobs", and dropping the old table deletes every
    # allocation with it (their foreign key cascades). SQLite 3.35+ drops a column in place.
    op.drop_column("jobs", "interactive")
