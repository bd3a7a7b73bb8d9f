"""credit notes: their own gap-free series, once per confirmed refund or lost chargeback

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

from cmsshop.models.meta import UTCDateTime

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "credit_note_counters",
        sa.Column("year", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_sequence", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("year", name=op.f("pk_credit_note_counters")),
    )
    op.create_table(
        "credit_notes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("number", sa.String(32), nullable=False),
        sa.Column("year", sa.Integer(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("cause", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("invoice_id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("refund_id", sa.Integer(), nullable=True),
        sa.Column("issued_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("net_total", sa.BigInteger(), nullable=False),
        sa.Column("tax_total", sa.BigInteger(), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=False),
        sa.CheckConstraint("total <= 0", name=op.f("ck_credit_notes_total")),
        sa.CheckConstraint("kind IN ('refund', 'chargeback')", name=op.f("ck_credit_notes_kind")),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_credit_notes_invoice_id_invoices")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_credit_notes_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_credit_notes_user_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["refund_id"], ["refunds.id"], name=op.f("fk_credit_notes_refund_id_refunds")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credit_notes")),
        sa.UniqueConstraint("cause", name=op.f("uq_credit_notes_cause")),
        sa.UniqueConstraint("number", name=op.f("uq_credit_notes_number")),
    )
    for column in ("invoice_id", "order_id", "user_id"):
        op.create_index(op.f(f"ix_credit_notes_{column}"), "credit_notes", [column])


def downgrade() -> None:
    op.drop_table("credit_notes")
    op.drop_table("credit_note_counters")
