"""quotas per resource, hybrid pools' bounds, card mode switches, replica copies

The quotas' column ``flavour`` is named ``resource`` (in Kueue a flavour is a node class);
pools get ``mig_cards_min``/``mig_cards_max`` (how many of a hybrid pool's MIG-capable cards
may be MIG cards); a device gets ``want_mode``, the mode the server ordered it into; a job
gets ``replaces``, the replica a defragmentation copy replaces (make-before-break).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 19:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("quotas") as batch:
        batch.alter_column("flavour", new_column_name="resource")
    with op.batch_alter_table("pools") as batch:
        batch.add_column(
            sa.Column("mig_cards_min", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("mig_cards_max", sa.Integer(), nullable=True))
    with op.batch_alter_table("devices") as batch:
        batch.add_column(sa.Column("want_mode", sa.String(length=10), nullable=True))
        batch.add_column(sa.Column("want_since", sa.Float(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("replaces", sa.BigInteger(), nullable=True))
        batch.create_index("ix_jobs_replaces", ["replaces"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_replaces")
        batch.drop_column("replaces")
    with op.batch_alter_table("devices") as batch:
        batch.drop_column("want_since")
        batch.drop_column("want_mode")
    with op.batch_alter_table("pools") as batch:
        batch.drop_column("mig_cards_max")
        batch.drop_column("mig_cards_min")
    with op.batch_alter_table("quotas") as batch:
        batch.alter_column("resource", new_column_name="flavour")
