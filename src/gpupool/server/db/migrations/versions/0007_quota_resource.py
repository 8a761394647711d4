"""quotas: the column ``flavour`` is named ``resource`` (in Kueue a flavour is a node class)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 19:30:00
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("quotas") as batch:
        batch.alter_column("flavour", new_column_name="resource")


def downgrade() -> None:
    with op.batch_alter_table("quotas") as batch:
        batch.alter_column("resource", new_column_name="flavour")
