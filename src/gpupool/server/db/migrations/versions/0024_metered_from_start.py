"""metering starts when the workload starts (issue 57): an allocation's ``started_at``

Allocations granted before keep the old rule (metered from their grant): those released, or
whose workload had started, start at their grant; those still waiting for their workload start
when its agent says so.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-08 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("started_at", sa.Float(), nullable=True))
    op.execute(
        "UPDATE allocations SET started_at = created_at"
        " WHERE state = 'released' OR action = 'kubernetes'"
        " OR EXISTS (SELECT 1 FROM allocation_nodes n"
        "  WHERE n.allocation_id = allocations.id AND n.started_at IS NOT NULL)"
        " OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = allocations.job_id AND j.state = 'running')"
    )


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_column("started_at")
