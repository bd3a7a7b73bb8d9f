"""licensing nonces and audit tables

Revision ID: 0004
Revises: 0003
Owned by the licensing feature work: the per-licence nonce table (replay protection)
and the audit log of every licensing call.
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "licence_nonces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("licence_id", sa.Integer(), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=False),
        sa.Column("seen_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["licence_id"],
            ["licences.id"],
            name=op.f("fk_licence_nonces_licence_id_licences"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_licence_nonces")),
        sa.UniqueConstraint("licence_id", "nonce", name=op.f("uq_licence_nonces_licence_id_nonce")),
    )
    with op.batch_alter_table("licence_nonces", schema=None) as batch_op:
        batch_op.create_index("ix_licence_nonces_seen_at", ["seen_at"], unique=False)

    op.create_table(
        "licence_audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("licence_id", sa.Integer(), nullable=True),
        sa.Column("activation_id", sa.Integer(), nullable=True),
        sa.Column("key_hint", sa.String(length=16), nullable=True),
        sa.Column("product", sa.String(length=100), nullable=True),
        sa.Column("fingerprint_sha256", sa.String(length=64), nullable=True),
        sa.Column("domain", sa.String(length=255), nullable=True),
        sa.Column("environment", sa.String(length=20), nullable=True),
        sa.Column("ip", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["licence_id"],
            ["licences.id"],
            name=op.f("fk_licence_audit_log_licence_id_licences"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_licence_audit_log")),
    )
    with op.batch_alter_table("licence_audit_log", schema=None) as batch_op:
        batch_op.create_index("ix_licence_audit_log_created_at", ["created_at"], unique=False)
        batch_op.create_index("ix_licence_audit_log_licence_id", ["licence_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("licence_audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_licence_audit_log_licence_id")
        batch_op.drop_index("ix_licence_audit_log_created_at")
    op.drop_table("licence_audit_log")
    with op.batch_alter_table("licence_nonces", schema=None) as batch_op:
        batch_op.drop_index("ix_licence_nonces_seen_at")
    op.drop_table("licence_nonces")
