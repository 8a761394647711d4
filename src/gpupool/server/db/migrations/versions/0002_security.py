"""security: expiring tokens, disabled users, on_lost keep-running

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("expires_at", sa.Float(), nullable=True))
    with op.batch_alter_table("users") as batch:
        batch.add_column(
            sa.Column("disabled", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column(
            "on_lost", existing_type=sa.String(length=10), type_=sa.String(length=20)
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column(
            "on_lost", existing_type=sa.String(length=20), type_=sa.String(length=10)
        )
    with op.batch_alter_table("users") as batch:
        batch.drop_column("disabled")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("expires_at")
