"""ix_articles_search (SQLite only): a search's count reads the published flag, title and
summary from the index instead of every article's row with its body (a quarter less
work for the count; docs/performance.md). PostgreSQL compares the folded columns, and its
B-tree entries are bounded, so it has none.

Revision ID: 0037
Revises: 0036
"""

from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index("ix_articles_search", "articles", ["published", "title", "summary"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_articles_search", table_name="articles")
