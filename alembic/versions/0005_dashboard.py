"""support tickets and download log tables

Revision ID: 0005
Revises: 0004
Owned by the dashboard feature work; empty until that module needs schema changes.
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

import cmsshop.models.meta  # noqa: F401

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
