"""support tickets and download log tables

Revision ID: 0005
Revises: 0004
Owned by the dashboard feature work: support_tickets and download_logs.
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "support_tickets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("number", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=True),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('open', 'pending', 'closed')", name=op.f("ck_support_tickets_status")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_support_tickets_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_support_tickets_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_support_tickets")),
        sa.UniqueConstraint("number", name=op.f("uq_support_tickets_number")),
    )
    with op.batch_alter_table("support_tickets", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_support_tickets_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_support_tickets_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_support_tickets_user_id"), ["user_id"], unique=False)

    op.create_table(
        "download_logs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("entitlement_id", sa.Integer(), nullable=False),
        sa.Column("release_id", sa.Integer(), nullable=True),
        sa.Column("version", sa.String(length=50), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("ip", sa.String(length=64), nullable=False),
        sa.Column("user_agent", sa.String(length=255), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("range_start", sa.BigInteger(), nullable=True),
        sa.Column("range_end", sa.BigInteger(), nullable=True),
        sa.Column("content_length", sa.BigInteger(), nullable=False),
        sa.Column("delivery", sa.String(length=20), nullable=False),
        sa.CheckConstraint(
            "delivery IN ('stream', 'x-accel-redirect')", name=op.f("ck_download_logs_delivery")
        ),
        sa.ForeignKeyConstraint(
            ["entitlement_id"],
            ["entitlements.id"],
            name=op.f("fk_download_logs_entitlement_id_entitlements"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["release_id"],
            ["releases.id"],
            name=op.f("fk_download_logs_release_id_releases"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_download_logs")),
    )
    with op.batch_alter_table("download_logs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_download_logs_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_download_logs_entitlement_id"), ["entitlement_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_download_logs_release_id"), ["release_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("download_logs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_download_logs_release_id"))
        batch_op.drop_index(batch_op.f("ix_download_logs_entitlement_id"))
        batch_op.drop_index(batch_op.f("ix_download_logs_created_at"))
    op.drop_table("download_logs")

    with op.batch_alter_table("support_tickets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_support_tickets_user_id"))
        batch_op.drop_index(batch_op.f("ix_support_tickets_status"))
        batch_op.drop_index(batch_op.f("ix_support_tickets_created_at"))
    op.drop_table("support_tickets")
