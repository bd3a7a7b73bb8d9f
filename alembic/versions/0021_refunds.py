"""refunds asked for in the console

Revision ID: 0021
Revises: 0020
One row per refund of an order: asked for by an admin (recorded before the provider is
called, with the idempotency key sent to it) or made at the provider's dashboard
(requested_by NULL, created when its event arrives).
"""

import sqlalchemy as sa
from alembic import op

from cmsshop.models.meta import UTCDateTime

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "refunds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("provider", sa.String(40), nullable=False),
        sa.Column("provider_refund_id", sa.String(255), nullable=True),
        sa.Column("idempotency_key", sa.String(64), nullable=False),
        sa.Column("requested_by", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("confirmed_at", UTCDateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("amount > 0", name=op.f("ck_refunds_amount")),
        sa.CheckConstraint(
            "status IN ('requested', 'pending', 'succeeded', 'failed')",
            name=op.f("ck_refunds_status"),
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_refunds_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["requested_by"], ["users.id"], name=op.f("fk_refunds_requested_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_refunds")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_refunds_idempotency_key")),
        sa.UniqueConstraint(
            "provider", "provider_refund_id", name=op.f("uq_refunds_provider_provider_refund_id")
        ),
    )
    op.create_index(op.f("ix_refunds_order_id"), "refunds", ["order_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_refunds_order_id"), table_name="refunds")
    op.drop_table("refunds")
