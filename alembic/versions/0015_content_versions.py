"""content_versions: the counter that keeps the processes' answer caches in step

Revision ID: 0015
Revises: 0014
One row, ``public``, bumped by every catalogue or docs write (cmsshop.cache).
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "content_versions",
        sa.Column("name", sa.String(length=20), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_content_versions")),
    )
    op.bulk_insert(table, [{"name": "public", "version": 0}])


def downgrade() -> None:
    op.drop_table("content_versions")
