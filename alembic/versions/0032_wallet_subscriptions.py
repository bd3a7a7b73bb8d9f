"""wallet subscriptions: the plans made at a provider that bills against plans created
in advance (PayPal), and the subscription payments parked because their event named no
subscription and matched none

Revision ID: 0032
Revises: 0031
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

UTC = cmsshop.models.meta.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "subscription_provider_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=False),
        sa.Column("interval", sa.String(length=10), nullable=False),
        sa.Column("interval_count", sa.Integer(), nullable=False),
        sa.Column("provider_plan_id", sa.String(length=255), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.CheckConstraint(
            "interval IN ('day', 'week', 'month', 'year')",
            name=op.f("ck_subscription_provider_plans_interval"),
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["subscription_plans.id"],
            name=op.f("fk_subscription_provider_plans_plan_id_subscription_plans"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscription_provider_plans")),
        sa.UniqueConstraint(
            "plan_id",
            "provider",
            "currency",
            "amount",
            "interval",
            "interval_count",
            name=op.f("uq_subscription_provider_plans_key"),
        ),
    )
    op.create_table(
        "parked_payments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("payment_id", sa.String(length=255), nullable=False),
        sa.Column("amount", sa.Integer(), nullable=True),
        sa.Column("currency", sa.String(length=3), nullable=True),
        sa.Column("payment_event_id", sa.Integer(), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("resolved_at", UTC, nullable=True),
        sa.Column("resolution", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(
            ["payment_event_id"],
            ["payment_events.id"],
            name=op.f("fk_parked_payments_payment_event_id_payment_events"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_parked_payments")),
        sa.UniqueConstraint(
            "provider", "payment_id", name=op.f("uq_parked_payments_provider_payment_id")
        ),
    )


def downgrade() -> None:
    op.drop_table("parked_payments")
    op.drop_table("subscription_provider_plans")
