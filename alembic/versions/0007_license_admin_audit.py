"""license admin audit: who changed a license by hand, and what changed

Revision ID: 0007
Revises: 0006
The admin console's license actions (suspend, reinstate, revoke, extend, seat limit,
reset activations) are written to the license audit log with the admin and the change.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("licence_audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("admin_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("detail", sa.String(length=500), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_licence_audit_log_admin_id_users"),
            "users",
            ["admin_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("licence_audit_log", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_licence_audit_log_admin_id_users"), type_="foreignkey"
        )
        batch_op.drop_column("detail")
        batch_op.drop_column("admin_id")
