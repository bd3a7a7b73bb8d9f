"""store and docs module tables

Revision ID: 0002
Revises: 0001
Owned by the store_docs feature work: listing indexes for the public catalogue and
articles, and the "at most one default currency" partial unique index.
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta  # noqa: F401

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.create_index(
            "ix_products_listing", ["published", "archived", "name", "id"], unique=False
        )
    with op.batch_alter_table("articles", schema=None) as batch_op:
        batch_op.create_index(
            "ix_articles_listing", ["published", "published_at", "id"], unique=False
        )
    with op.batch_alter_table("currencies", schema=None) as batch_op:
        batch_op.create_index(
            "uq_currencies_is_default",
            ["is_default"],
            unique=True,
            sqlite_where=sa.text("is_default"),
            postgresql_where=sa.text("is_default"),
        )


def downgrade() -> None:
    with op.batch_alter_table("currencies", schema=None) as batch_op:
        batch_op.drop_index("uq_currencies_is_default")
    with op.batch_alter_table("articles", schema=None) as batch_op:
        batch_op.drop_index("ix_articles_listing")
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_index("ix_products_listing")
