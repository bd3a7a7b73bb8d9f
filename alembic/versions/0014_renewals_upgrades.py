"""renewals and upgrades: order_items.kind and target_license_id, license_changes,
products.upgrade_group and tier

Revision ID: 0014
Revises: 0013
Existing order items are purchases; existing products belong to no upgrade group.
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(sa.Column("upgrade_group", sa.String(length=50), nullable=True))
        batch_op.add_column(sa.Column("tier", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("order_items", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=10), server_default="purchase", nullable=False)
        )
        batch_op.add_column(sa.Column("target_license_id", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_order_items_target_license_id"), ["target_license_id"], unique=False
        )
        batch_op.create_check_constraint("kind", "kind IN ('purchase', 'renewal', 'upgrade')")
        batch_op.create_check_constraint(
            "target_license", "(kind = 'purchase') = (target_license_id IS NULL)"
        )
    op.create_table(
        "license_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("order_item_id", sa.Integer(), nullable=False),
        sa.Column("license_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("old_expires_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("new_expires_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("old_product_id", sa.Integer(), nullable=False),
        sa.Column("new_product_id", sa.Integer(), nullable=False),
        sa.Column("old_max_activations", sa.Integer(), nullable=False),
        sa.Column("new_max_activations", sa.Integer(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('renewal', 'upgrade')", name=op.f("ck_license_changes_kind")),
        sa.ForeignKeyConstraint(
            ["license_id"], ["licences.id"], name=op.f("fk_license_changes_license_id_licences")
        ),
        sa.ForeignKeyConstraint(
            ["new_product_id"], ["products.id"],
            name=op.f("fk_license_changes_new_product_id_products"),
        ),
        sa.ForeignKeyConstraint(
            ["old_product_id"], ["products.id"],
            name=op.f("fk_license_changes_old_product_id_products"),
        ),
        sa.ForeignKeyConstraint(
            ["order_item_id"], ["order_items.id"],
            name=op.f("fk_license_changes_order_item_id_order_items"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_license_changes")),
        sa.UniqueConstraint("order_item_id", name=op.f("uq_license_changes_order_item_id")),
    )
    with op.batch_alter_table("license_changes", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_license_changes_license_id"), ["license_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("license_changes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_license_changes_license_id"))
    op.drop_table("license_changes")
    with op.batch_alter_table("order_items", schema=None) as batch_op:
        batch_op.drop_constraint("target_license", type_="check")
        batch_op.drop_constraint("kind", type_="check")
        batch_op.drop_index(batch_op.f("ix_order_items_target_license_id"))
        batch_op.drop_column("target_license_id")
        batch_op.drop_column("kind")
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_column("tier")
        batch_op.drop_column("upgrade_group")
