"""payment settings and fulfilment audit tables

Revision ID: 0003
Revises: 0002
Owned by the payments feature work: admin-saved provider settings (secrets encrypted),
the delivery headers of each logged event (re-verification on reprocess), and an index
on orders.payment_reference (refund and dispute events name the payment, not the order).
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "payment_settings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("field", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("encrypted", sa.Boolean(), nullable=False),
        sa.Column("updated_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["updated_by"],
            ["users.id"],
            name=op.f("fk_payment_settings_updated_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_settings")),
        sa.UniqueConstraint(
            "provider", "field", name=op.f("uq_payment_settings_provider_field")
        ),
    )
    with op.batch_alter_table("payment_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("headers", sa.Text(), nullable=True))
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_orders_payment_reference"), ["payment_reference"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_orders_payment_reference"))
    with op.batch_alter_table("payment_events", schema=None) as batch_op:
        batch_op.drop_column("headers")
    op.drop_table("payment_settings")
