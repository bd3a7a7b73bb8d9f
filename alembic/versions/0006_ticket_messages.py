"""ticket messages: the conversation of a support ticket

Revision ID: 0006
Revises: 0005
Replies after a ticket's opening message, from the customer or from staff.
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ticket_messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ticket_id", sa.Integer(), nullable=False),
        sa.Column("author_id", sa.Integer(), nullable=False),
        sa.Column("from_staff", sa.Boolean(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"], ["users.id"], name=op.f("fk_ticket_messages_author_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["ticket_id"],
            ["support_tickets.id"],
            name=op.f("fk_ticket_messages_ticket_id_support_tickets"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ticket_messages")),
    )
    with op.batch_alter_table("ticket_messages", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_ticket_messages_ticket_id"), ["ticket_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("ticket_messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ticket_messages_ticket_id"))
    op.drop_table("ticket_messages")
