"""tenants' admission limits and the log characters the server holds for each

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 05:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("limits", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(
            sa.Column("log_bytes", sa.BigInteger(), nullable=False, server_default="0")
        )
    op.execute(
        "UPDATE tenants SET log_bytes = COALESCE((SELECT SUM(LENGTH(job_logs.text)) "
        "FROM job_logs JOIN jobs ON jobs.id = job_logs.job_id "
        "WHERE jobs.tenant = tenants.name), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("log_bytes")
        batch.drop_column("limits")
