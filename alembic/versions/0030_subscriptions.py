"""subscriptions: products sold as a recurring charge, each buyer's provider-side
subscription, and the periods paid (one row per provider invoice)

Revision ID: 0030
Revises: 0029
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

UTC = cmsshop.models.meta.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "subscription_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("product_id", sa.Integer(), nullable=False),
        sa.Column("interval", sa.String(length=10), nullable=False),
        sa.Column("interval_count", sa.Integer(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.CheckConstraint(
            "interval IN ('day', 'week', 'month', 'year')",
            name=op.f("ck_subscription_plans_interval"),
        ),
        sa.CheckConstraint(
            "interval_count >= 1 AND interval_count <= 52",
            name=op.f("ck_subscription_plans_interval_count"),
        ),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_subscription_plans_product_id_products"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscription_plans")),
        sa.UniqueConstraint("product_id", name=op.f("uq_subscription_plans_product_id")),
    )
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("provider_subscription_id", sa.String(length=255), nullable=False),
        sa.Column("provider_customer_id", sa.String(length=255), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("license_id", sa.Integer(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("current_period_end", UTC, nullable=True),
        sa.Column("cancel_at_period_end", sa.Boolean(), nullable=False),
        sa.Column("paid_through", UTC, nullable=True),
        sa.Column("last_event_at", UTC, nullable=True),
        sa.Column("synced_at", UTC, nullable=True),
        sa.Column("ended_at", UTC, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.CheckConstraint(
            "status IN ('trialing', 'active', 'past_due', 'paused', 'cancel_scheduled', 'ended')",
            name=op.f("ck_subscriptions_status"),
        ),
        sa.ForeignKeyConstraint(
            ["license_id"], ["licences.id"], name=op.f("fk_subscriptions_license_id_licences")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_subscriptions_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["subscription_plans.id"],
            name=op.f("fk_subscriptions_plan_id_subscription_plans"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_subscriptions_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("order_id", name=op.f("uq_subscriptions_order_id")),
        sa.UniqueConstraint(
            "provider",
            "provider_subscription_id",
            name=op.f("uq_subscriptions_provider_provider_subscription_id"),
        ),
    )
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.create_index("ix_subscriptions_user_id", ["user_id"], unique=False)
        batch_op.create_index(
            "uq_subscriptions_live_license",
            ["license_id"],
            unique=True,
            sqlite_where=sa.text("status != 'ended'"),
            postgresql_where=sa.text("status != 'ended'"),
        )
    op.create_table(
        "subscription_periods",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("provider_invoice_id", sa.String(length=255), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("period_start", UTC, nullable=False),
        sa.Column("period_end", UTC, nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("refunded_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_subscription_periods_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["subscriptions.id"],
            name=op.f("fk_subscription_periods_subscription_id_subscriptions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscription_periods")),
        sa.UniqueConstraint("order_id", name=op.f("uq_subscription_periods_order_id")),
        sa.UniqueConstraint(
            "provider",
            "provider_invoice_id",
            name=op.f("uq_subscription_periods_provider_provider_invoice_id"),
        ),
    )
    with op.batch_alter_table("subscription_periods", schema=None) as batch_op:
        batch_op.create_index(
            "ix_subscription_periods_subscription_id", ["subscription_id"], unique=False
        )


def downgrade() -> None:
    op.drop_table("subscription_periods")
    op.drop_table("subscriptions")
    op.drop_table("subscription_plans")
