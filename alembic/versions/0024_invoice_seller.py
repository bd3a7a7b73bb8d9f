"""invoices keep the seller's identity as it was when they were issued

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Null for the invoices issued before: they named no seller, and stay as issued.
    op.add_column("invoices", sa.Column("seller", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("invoices", "seller")
