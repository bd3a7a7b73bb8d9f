"""license change reversals: license_changes.old_features, reversed_at and reversal;
license_reviews

Revision ID: 0018
Revises: 0017
Existing changes were never reversed; their old features are unknown (NULL: a reversal
falls back to the old product's flags).
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("license_changes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("old_features", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("reversed_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("reversal", sa.String(length=10), nullable=True))
        batch_op.create_check_constraint(
            "reversal", "reversal IS NULL OR reversal IN ('refund', 'chargeback')"
        )
    op.create_table(
        "license_reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("license_id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("note", sa.String(length=500), nullable=False),
        sa.Column("refunded_amount", sa.BigInteger(), nullable=True),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["license_id"], ["licences.id"], name=op.f("fk_license_reviews_license_id_licences")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_license_reviews_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["resolved_by"], ["users.id"], name=op.f("fk_license_reviews_resolved_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_license_reviews")),
        sa.UniqueConstraint(
            "order_id", "license_id", name=op.f("uq_license_reviews_order_id_license_id")
        ),
    )
    with op.batch_alter_table("license_reviews", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_license_reviews_license_id"), ["license_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("license_reviews", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_license_reviews_license_id"))
    op.drop_table("license_reviews")
    with op.batch_alter_table("license_changes", schema=None) as batch_op:
        batch_op.drop_constraint("reversal", type_="check")
        batch_op.drop_column("reversal")
        batch_op.drop_column("reversed_at")
        batch_op.drop_column("old_features")
