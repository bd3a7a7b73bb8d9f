"""free trials on subscription plans: subscription_plans.trial_days (0-90, 0 for none),
and subscription_provider_plans keyed on it too, so a PayPal plan that opens with a
free trial is a different plan from one that bills from the start

Revision ID: 0033
Revises: 0032
subscription_plans keeps the triggers of 0031: on SQLite the column and its check are
added by ALTER TABLE (a batch rebuild would drop them); subscription_provider_plans has
none, so its unique key is rebuilt in a batch.
"""

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

CHECK = "trial_days >= 0 AND trial_days <= 90"
OLD_KEY = ("plan_id", "provider", "currency", "amount", "interval", "interval_count")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.add_column(
            "subscription_plans",
            sa.Column("trial_days", sa.Integer(), server_default="0", nullable=False),
        )
        op.create_check_constraint("trial_days", "subscription_plans", CHECK)
    else:
        op.execute(
            "ALTER TABLE subscription_plans ADD COLUMN trial_days INTEGER DEFAULT '0' NOT NULL "
            f"CONSTRAINT ck_subscription_plans_trial_days CHECK ({CHECK})"
        )
    with op.batch_alter_table("subscription_provider_plans") as batch_op:
        batch_op.add_column(
            sa.Column("trial_days", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.drop_constraint("uq_subscription_provider_plans_key", type_="unique")
        batch_op.create_unique_constraint(
            "uq_subscription_provider_plans_key", [*OLD_KEY, "trial_days"]
        )


def downgrade() -> None:
    op.execute("DELETE FROM subscription_provider_plans WHERE trial_days != 0")
    with op.batch_alter_table("subscription_provider_plans") as batch_op:
        batch_op.drop_constraint("uq_subscription_provider_plans_key", type_="unique")
        batch_op.create_unique_constraint("uq_subscription_provider_plans_key", list(OLD_KEY))
        batch_op.drop_column("trial_days")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("ck_subscription_plans_trial_days", "subscription_plans")
    # A plain ALTER TABLE on SQLite too (its check is the column's own): no rebuild.
    op.execute("ALTER TABLE subscription_plans DROP COLUMN trial_days")
