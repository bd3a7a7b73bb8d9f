"""the seller's legal identity and tax settings, the invoice logo, buyers' billing details

Revision ID: 0022
Revises: 0021
shop_settings holds console-edited shop-wide values (ini/environment give the defaults),
shop_files the uploaded logo, billing_profiles a customer's billing details; orders.billing
keeps the details given at checkout, a snapshot.
"""

import sqlalchemy as sa
from alembic import op

from cmsshop.models.meta import UTCDateTime

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shop_settings",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["updated_by"],
            ["users.id"],
            name=op.f("fk_shop_settings_updated_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_shop_settings")),
    )
    op.create_table(
        "shop_files",
        sa.Column("name", sa.String(40), nullable=False),
        sa.Column("content_type", sa.String(40), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_shop_files")),
    )
    op.create_table(
        "billing_profiles",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("country", sa.String(2), nullable=False),
        sa.Column("region", sa.String(10), nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("company", sa.String(200), nullable=True),
        sa.Column("address_line1", sa.String(200), nullable=True),
        sa.Column("address_line2", sa.String(200), nullable=True),
        sa.Column("city", sa.String(100), nullable=True),
        sa.Column("postal_code", sa.String(20), nullable=True),
        sa.Column("vat_id", sa.String(20), nullable=True),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_billing_profiles_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_billing_profiles")),
    )
    op.add_column("orders", sa.Column("billing", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.drop_column("billing")
    op.drop_table("billing_profiles")
    op.drop_table("shop_files")
    op.drop_table("shop_settings")
