"""warm-parked service replicas: how many engines a service keeps, and each replica's park;
where a service's replicas go (spread or packed), as a job's placement policy; when a
running allocation's job last said it saved a checkpoint

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 22:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("services") as batch:
        batch.add_column(sa.Column("warm", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(
            sa.Column("placement", sa.String(10), nullable=False, server_default="spread")
        )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("policy", sa.String(20), nullable=True))
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("checkpointed_at", sa.Float(), nullable=True))
    with op.batch_alter_table("service_replicas") as batch:
        batch.add_column(
            sa.Column("parked", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("park_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("wake_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("card", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("woke_in_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("checkpointed_at")
    with op.batch_alter_table("service_replicas") as batch:
        for name in ("woke_in_s", "card", "wake_at", "park_at", "parked"):
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("policy")
    with op.batch_alter_table("services") as batch:
        batch.drop_column("placement")
        batch.drop_column("warm")
