"""carts, coupons, quantities and guest orders

Revision ID: 0020
Revises: 0019
Carts (one per customer or anonymous visitor, created by the first "add to cart"),
coupons with their per-currency amounts, product scope and one redemption per order;
order lines get a quantity, a unit price and their share of the discount; orders the
discount, the coupon's code and whether a guest placed them; products the most one
order may buy. Existing lines are one unit at their amount, with no discount.
"""

import sqlalchemy as sa
from alembic import op

from cmsshop.models.meta import UTCDateTime

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # products: a plain ADD COLUMN (its CHECK inline), not batch mode, which on SQLite
    # would copy the table and lose its content-version triggers (0017).
    op.add_column(
        "products",
        sa.Column(
            "max_quantity",
            sa.Integer(),
            sa.CheckConstraint(
                "max_quantity IS NULL OR max_quantity >= 1", name="ck_products_max_quantity"
            ),
            nullable=True,
        ),
    )
    with op.batch_alter_table("orders") as batch:
        batch.add_column(sa.Column("discount", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("coupon_code", sa.String(40), nullable=True))
        batch.add_column(
            sa.Column("guest", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("visitor_hash", sa.String(64), nullable=True))
    with op.batch_alter_table("order_items") as batch:
        batch.add_column(sa.Column("quantity", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("unit_amount", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("discount", sa.BigInteger(), nullable=False, server_default="0"))
        batch.create_check_constraint("quantity", "quantity >= 1")
        batch.create_check_constraint("discount", "discount >= 0")

    op.create_table(
        "carts",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("visitor_hash", sa.String(64), nullable=True),
        sa.Column("currency", sa.String(3), nullable=True),
        sa.Column("coupon_code", sa.String(40), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "user_id IS NOT NULL OR visitor_hash IS NOT NULL", name=op.f("ck_carts_owner")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_carts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_carts")),
        sa.UniqueConstraint("user_id", name=op.f("uq_carts_user_id")),
        sa.UniqueConstraint("visitor_hash", name=op.f("uq_carts_visitor_hash")),
    )
    op.create_index(op.f("ix_carts_updated_at"), "carts", ["updated_at"])
    op.create_table(
        "cart_lines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cart_id", sa.String(32), nullable=False),
        sa.Column("product_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("seen_amount", sa.BigInteger(), nullable=True),
        sa.Column("seen_currency", sa.String(3), nullable=True),
        sa.Column("added_at", UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint("quantity >= 1", name=op.f("ck_cart_lines_quantity")),
        sa.ForeignKeyConstraint(
            ["cart_id"], ["carts.id"], name=op.f("fk_cart_lines_cart_id_carts"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_cart_lines_product_id_products"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cart_lines")),
        sa.UniqueConstraint("cart_id", "product_id", name=op.f("uq_cart_lines_cart_id_product_id")),
    )
    op.create_index(op.f("ix_cart_lines_cart_id"), "cart_lines", ["cart_id"])
    op.create_index(op.f("ix_cart_lines_product_id"), "cart_lines", ["product_id"])

    op.create_table(
        "coupons",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(40), nullable=False),
        sa.Column("description", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("percent_off", sa.Integer(), nullable=True),
        sa.Column("valid_from", UTCDateTime(timezone=True), nullable=True),
        sa.Column("valid_until", UTCDateTime(timezone=True), nullable=True),
        sa.Column("max_redemptions", sa.Integer(), nullable=True),
        sa.Column("max_per_customer", sa.Integer(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("reserved", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('percent', 'fixed')", name=op.f("ck_coupons_kind")),
        sa.CheckConstraint(
            "(kind = 'percent') = (percent_off IS NOT NULL)"
            " AND (percent_off IS NULL OR percent_off BETWEEN 1 AND 100)",
            name=op.f("ck_coupons_percent_off"),
        ),
        sa.CheckConstraint(
            "max_redemptions IS NULL OR max_redemptions >= 1",
            name=op.f("ck_coupons_max_redemptions"),
        ),
        sa.CheckConstraint(
            "max_per_customer IS NULL OR max_per_customer >= 1",
            name=op.f("ck_coupons_max_per_customer"),
        ),
        sa.CheckConstraint("reserved >= 0", name=op.f("ck_coupons_reserved")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_coupons")),
        sa.UniqueConstraint("code", name=op.f("uq_coupons_code")),
    )
    op.create_table(
        "coupon_amounts",
        sa.Column("coupon_id", sa.Integer(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("amount_off", sa.BigInteger(), nullable=True),
        sa.Column("min_subtotal", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "amount_off IS NULL OR amount_off >= 1", name=op.f("ck_coupon_amounts_amount_off")
        ),
        sa.CheckConstraint(
            "min_subtotal IS NULL OR min_subtotal >= 0",
            name=op.f("ck_coupon_amounts_min_subtotal"),
        ),
        sa.ForeignKeyConstraint(
            ["coupon_id"],
            ["coupons.id"],
            name=op.f("fk_coupon_amounts_coupon_id_coupons"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["currency"],
            ["currencies.code"],
            name=op.f("fk_coupon_amounts_currency_currencies"),
        ),
        sa.PrimaryKeyConstraint("coupon_id", "currency", name=op.f("pk_coupon_amounts")),
    )
    op.create_table(
        "coupon_products",
        sa.Column("coupon_id", sa.Integer(), nullable=False),
        sa.Column("product_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["coupon_id"],
            ["coupons.id"],
            name=op.f("fk_coupon_products_coupon_id_coupons"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_coupon_products_product_id_products"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("coupon_id", "product_id", name=op.f("pk_coupon_products")),
    )
    op.create_table(
        "coupon_redemptions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("coupon_id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("discount", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('reserved', 'redeemed', 'released')",
            name=op.f("ck_coupon_redemptions_status"),
        ),
        sa.ForeignKeyConstraint(
            ["coupon_id"], ["coupons.id"], name=op.f("fk_coupon_redemptions_coupon_id_coupons")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_coupon_redemptions_order_id_orders")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_coupon_redemptions_user_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_coupon_redemptions")),
        sa.UniqueConstraint("order_id", name=op.f("uq_coupon_redemptions_order_id")),
    )
    op.create_index(op.f("ix_coupon_redemptions_coupon_id"), "coupon_redemptions", ["coupon_id"])
    op.create_index(op.f("ix_coupon_redemptions_user_id"), "coupon_redemptions", ["user_id"])


def downgrade() -> None:
    op.drop_table("coupon_redemptions")
    op.drop_table("coupon_products")
    op.drop_table("coupon_amounts")
    op.drop_table("coupons")
    op.drop_table("cart_lines")
    op.drop_table("carts")
    with op.batch_alter_table("order_items") as batch:
        batch.drop_constraint("quantity", type_="check")
        batch.drop_constraint("discount", type_="check")
        batch.drop_column("discount")
        batch.drop_column("unit_amount")
        batch.drop_column("quantity")
    with op.batch_alter_table("orders") as batch:
        batch.drop_column("visitor_hash")
        batch.drop_column("guest")
        batch.drop_column("coupon_code")
        batch.drop_column("discount")
    op.drop_column("products", "max_quantity")
