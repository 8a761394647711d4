"""sbatch's placement and timing options as columns of a job: --begin (begin_at), -w/--nodelist
and -x/--exclude (node names)

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-08 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("begin_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("nodelist", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("exclude", sa.JSON(), nullable=True))


def downgrade() -> None:
    # not a batch: on SQLite it rebuilds "jobs", and dropping the old table deleted every
    # allocation with it (their foreign key cascades). SQLite 3.35+ drops a column in place.
    for column in ("exclude", "nodelist", "begin_at"):
        op.drop_column("jobs", column)
