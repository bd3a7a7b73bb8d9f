"""licensing nonces and audit tables

Revision ID: 0004
Revises: 0003
Owned by the licensing feature work; empty until that module needs schema changes.
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

import cmsshop.models.meta  # noqa: F401

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
