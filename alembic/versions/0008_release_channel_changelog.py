"""releases: channel (stable/beta) and a Markdown changelog

Revision ID: 0008
Revises: 0007
Existing releases become `stable` with an empty changelog.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("channel", sa.String(length=20), server_default="stable", nullable=False)
        )
        batch_op.add_column(sa.Column("changelog", sa.Text(), server_default="", nullable=False))
        batch_op.add_column(
            sa.Column("changelog_html", sa.Text(), server_default="", nullable=False)
        )
        batch_op.create_check_constraint("channel", "channel IN ('stable', 'beta')")


def downgrade() -> None:
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.drop_constraint("channel", type_="check")
        batch_op.drop_column("changelog_html")
        batch_op.drop_column("changelog")
        batch_op.drop_column("channel")
