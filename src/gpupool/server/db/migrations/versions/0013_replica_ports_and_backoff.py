"""service replicas: the port their agent chose (on the allocation), replacements that back off

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 03:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("port", sa.Integer(), nullable=True))
    with op.batch_alter_table("service_replicas") as batch:
        batch.alter_column("port", existing_type=sa.Integer(), nullable=True)
    with op.batch_alter_table("services") as batch:
        batch.add_column(
            sa.Column("failures_in_row", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("retry_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("last_failure", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("services") as batch:
        batch.drop_column("last_failure")
        batch.drop_column("retry_at")
        batch.drop_column("failures_in_row")
    op.execute("UPDATE service_replicas SET port = 0 WHERE port IS NULL")
    with op.batch_alter_table("service_replicas") as batch:
        batch.alter_column("port", existing_type=sa.Integer(), nullable=False)
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("port")
