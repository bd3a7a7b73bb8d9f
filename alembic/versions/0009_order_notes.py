"""order notes: staff notes on an order (the admin console's order page)

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "order_notes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("author_id", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"], ["users.id"], name=op.f("fk_order_notes_author_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_order_notes_order_id_orders")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_order_notes")),
    )
    with op.batch_alter_table("order_notes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_order_notes_order_id"), ["order_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("order_notes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_order_notes_order_id"))
    op.drop_table("order_notes")
