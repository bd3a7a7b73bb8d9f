"""payment settings and fulfilment audit tables

Revision ID: 0003
Revises: 0002
Owned by the payments feature work; empty until that module needs schema changes.
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

import cmsshop.models.meta  # noqa: F401

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
