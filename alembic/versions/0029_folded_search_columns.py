"""lower() of the searched columns kept beside them (products' name and summary,
articles' title and summary)

Revision ID: 0029
Revises: 0028

A search matches ``<column>_folded LIKE lower(pattern)`` (services.store.listing
search_sql): on PostgreSQL the same answer as ``<column> ILIKE pattern``, which lowered
every scanned value on every search. STORED there (the table is rewritten once); SQLite
cannot add a stored generated column without rebuilding the table (which would drop the
content-version triggers), and its LIKE already folds ASCII case as its lower() does, so
there they are VIRTUAL: computed when read.
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

COLUMNS = {
    "products": (("name", 200), ("summary", 500)),
    "articles": (("title", 200), ("summary", 500)),
}


def upgrade() -> None:
    stored = op.get_bind().dialect.name == "postgresql"
    for table, columns in COLUMNS.items():
        for column, length in columns:
            op.add_column(
                table,
                sa.Column(
                    f"{column}_folded",
                    sa.String(length),
                    sa.Computed(f"lower({column})", persisted=stored),
                ),
            )


def downgrade() -> None:
    for table, columns in COLUMNS.items():
        for column, _ in columns:
            # SQLite (3.35+) drops a column in place, without batch mode's rebuild.
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}_folded")
