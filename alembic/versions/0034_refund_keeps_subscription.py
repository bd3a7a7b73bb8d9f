"""a refund that asked to keep the subscription it would end running
(refunds.keep_subscription): a full refund of the order that bought a subscription, or
of its latest paid period's order, cancels the subscription at the provider unless the
console's refund said cancelSubscription: false

Revision ID: 0034
Revises: 0033
"""

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table rebuild on SQLite): a constant default is allowed.
    op.add_column(
        "refunds",
        sa.Column("keep_subscription", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("refunds") as batch:
        batch.drop_column("keep_subscription")
