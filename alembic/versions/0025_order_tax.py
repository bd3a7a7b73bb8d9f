"""orders carry their tax: the amounts per line, the rules applied, the evidence; invoices
keep the tax they state

Revision ID: 0025
Revises: 0024
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Orders placed before taxes were charged carry none: tax 0, no details; their lines
    # read as all net (services.payments.lines).
    op.add_column(
        "orders", sa.Column("tax", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.add_column("orders", sa.Column("tax_details", sa.JSON(), nullable=True))
    op.add_column("orders", sa.Column("cross_border_eur", sa.BigInteger(), nullable=True))
    op.add_column("order_items", sa.Column("net", sa.BigInteger(), nullable=True))
    op.add_column("order_items", sa.Column("tax", sa.BigInteger(), nullable=True))
    op.add_column("invoices", sa.Column("tax", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("invoices", "tax")
    op.drop_column("order_items", "tax")
    op.drop_column("order_items", "net")
    op.drop_column("orders", "cross_border_eur")
    op.drop_column("orders", "tax_details")
    op.drop_column("orders", "tax")
