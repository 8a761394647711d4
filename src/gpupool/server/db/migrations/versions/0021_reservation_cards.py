"""reservations of N cards: how many of a reservation's nodes' cards it holds

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 17:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reservations") as batch:
        batch.add_column(sa.Column("cards", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reservations") as batch:
        batch.drop_column("cards")
