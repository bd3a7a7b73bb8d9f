"""subscription_provider_plans keyed on the first cycle's amount too (first_amount, 0
for none): a PayPal plan whose first cycle a coupon discounted (a priced TRIAL cycle
before the regular ones) is a different plan from one charging the full price from the
start

Revision ID: 0035
Revises: 0034
subscription_provider_plans has no triggers: its unique key is rebuilt in a batch.
"""

import sqlalchemy as sa
from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

OLD_KEY = ("plan_id", "provider", "currency", "amount", "interval", "interval_count", "trial_days")


def upgrade() -> None:
    with op.batch_alter_table("subscription_provider_plans") as batch_op:
        batch_op.add_column(
            sa.Column("first_amount", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.drop_constraint("uq_subscription_provider_plans_key", type_="unique")
        batch_op.create_unique_constraint(
            "uq_subscription_provider_plans_key", [*OLD_KEY, "first_amount"]
        )


def downgrade() -> None:
    op.execute("DELETE FROM subscription_provider_plans WHERE first_amount != 0")
    with op.batch_alter_table("subscription_provider_plans") as batch_op:
        batch_op.drop_constraint("uq_subscription_provider_plans_key", type_="unique")
        batch_op.create_unique_constraint("uq_subscription_provider_plans_key", list(OLD_KEY))
        batch_op.drop_column("first_amount")
