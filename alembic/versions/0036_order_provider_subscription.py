"""orders.provider_subscription_id: the provider's subscription an order bought, kept
from its first invoice on, so that refunding an order held for review (which has no
subscriptions row: nothing was delivered) still cancels that subscription

Revision ID: 0036
Revises: 0035
A plain ADD COLUMN (nullable): the orders table keeps its triggers.
"""

import sqlalchemy as sa
from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("orders", sa.Column("provider_subscription_id", sa.String(255), nullable=True))


def downgrade() -> None:
    op.drop_column("orders", "provider_subscription_id")
