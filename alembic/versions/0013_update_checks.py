"""update checks: products.version_scheme, releases' minimum requirements

Revision ID: 0013
Revises: 0012
Existing products compare versions by PEP 440; existing releases state no requirements.
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("version_scheme", sa.String(length=10), server_default="pep440", nullable=False)
        )
        batch_op.create_check_constraint("version_scheme", "version_scheme IN ('pep440', 'semver')")
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("requires", sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column("requires_php", sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column("tested", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.drop_column("tested")
        batch_op.drop_column("requires_php")
        batch_op.drop_column("requires")
    with op.batch_alter_table("products", schema=None) as batch_op:
        batch_op.drop_constraint("version_scheme", type_="check")
        batch_op.drop_column("version_scheme")
