"""store and docs module tables

Revision ID: 0002
Revises: 0001
Owned by the store_docs feature work; empty until that module needs schema changes.
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

import cmsshop.models.meta  # noqa: F401

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
