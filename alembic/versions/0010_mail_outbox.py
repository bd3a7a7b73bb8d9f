"""mail: the transactional outbox

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox_messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dedupe_key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("to_address", sa.String(length=320), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("text_body", sa.Text(), nullable=False),
        sa.Column("html_body", sa.Text(), nullable=False),
        sa.Column("message_id", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column(
            "next_attempt_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("claimed_until", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("sent_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'sent', 'failed')", name=op.f("ck_outbox_messages_status")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_outbox_messages_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_messages")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_outbox_messages_dedupe_key")),
        sa.UniqueConstraint("message_id", name=op.f("uq_outbox_messages_message_id")),
    )
    with op.batch_alter_table("outbox_messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_outbox_messages_due", ["status", "next_attempt_at", "id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_outbox_messages_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_outbox_messages_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("outbox_messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_outbox_messages_user_id"))
        batch_op.drop_index(batch_op.f("ix_outbox_messages_created_at"))
        batch_op.drop_index("ix_outbox_messages_due")
    op.drop_table("outbox_messages")
