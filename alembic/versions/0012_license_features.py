"""products.features and licences.features: feature flags signed into leases

Revision ID: 0012
Revises: 0011
Existing products and licenses get no flags (an empty JSON list).
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("products", "licences"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("features", sa.JSON(), server_default="[]", nullable=False))


def downgrade() -> None:
    for table in ("licences", "products"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("features")
