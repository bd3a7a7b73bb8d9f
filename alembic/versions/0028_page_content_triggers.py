"""content_versions bumped by what the cached HTML pages read besides the catalogue

Revision ID: 0028
Revises: 0027
The answer cache keeps anonymous HTML pages (cmsshop.cache), and they show more than the
catalogue and docs tables of migrations 0017 and 0026: the brand (``brand.*`` rows of
shop_settings, the logo in shop_files), the footer's legal links (legal_documents) and
the pictures' stored renditions (media_files). Their writes bump the ``public`` row too,
made as 0017 makes them: PostgreSQL one statement-level trigger per table and event,
TRUNCATE included; SQLite row-level triggers. All four are written by the console only
(never by a checkout, a webhook or a page view), so a bump means a change a page shows.

SQLite's batch mode (``op.batch_alter_table``) recreates a table and drops its triggers:
a later migration that alters one of these tables with it must create them again
(``create_triggers`` below; tests/core/test_answer_cache.py fails if one is missing).
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

TABLES = ("shop_settings", "shop_files", "legal_documents", "media_files")
EVENTS = ("insert", "update", "delete")
PG_EVENTS = (*EVENTS, "truncate")
BUMP = (
    "INSERT INTO content_versions (name, version) VALUES ('public', 1) "
    "ON CONFLICT (name) DO UPDATE SET version = content_versions.version + 1"
)


def create_triggers(tables=TABLES) -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        # The function of migration 0017 (replaced with the same body: it stands alone).
        op.execute(
            "CREATE OR REPLACE FUNCTION cmsshop_bump_content_version() RETURNS trigger "
            f"LANGUAGE plpgsql AS $$ BEGIN {BUMP}; RETURN NULL; END $$"
        )
    for table in tables:
        for event in PG_EVENTS if postgresql else EVENTS:
            name = f"{table}_{event}_bumps_content_version"
            if postgresql:
                op.execute(
                    f"CREATE TRIGGER {name} AFTER {event.upper()} ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION cmsshop_bump_content_version()"
                )
            else:
                op.execute(
                    f"CREATE TRIGGER {name} AFTER {event.upper()} ON {table} "
                    f"FOR EACH ROW BEGIN {BUMP}; END"
                )


def upgrade() -> None:
    create_triggers()


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table in TABLES:
        for event in PG_EVENTS if postgresql else EVENTS:
            name = f"{table}_{event}_bumps_content_version"
            op.execute(f"DROP TRIGGER {name} ON {table}" if postgresql else f"DROP TRIGGER {name}")
