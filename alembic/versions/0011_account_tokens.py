"""accounts: one-time account tokens (password reset, email verification) and
users.email_verified_at

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "account_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(length=20), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("used_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "purpose IN ('password_reset', 'verify_email')",
            name=op.f("ck_account_tokens_purpose"),
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_account_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_account_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_account_tokens_token_hash")),
    )
    with op.batch_alter_table("account_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_account_tokens_user_id"), ["user_id"], unique=False)
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "email_verified_at",
                cmsshop.models.meta.UTCDateTime(timezone=True),
                nullable=True,
            )
        )
    # Accounts made before verification existed were trusted (made by the CLI, the demo
    # data or a registration that logged in at once): they stay able to log in.
    op.execute("UPDATE users SET email_verified_at = CURRENT_TIMESTAMP")


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("email_verified_at")
    with op.batch_alter_table("account_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_account_tokens_user_id"))
    op.drop_table("account_tokens")
