"""content_versions bumped by triggers: every write to public content, SQL included

Revision ID: 0017
Revises: 0016
Until now the ORM bumped the ``public`` row (cmsshop.cache), so a write around the ORM (an
operator's SQL, a bulk import) reached the processes' answer caches only when their
entries expired. Triggers on the five public content tables bump it for every insert,
update and delete, whoever writes: the version is the whole truth and an answer can stay
cached until it moves. PostgreSQL: one statement-level trigger per table and event (one
bump per statement), TRUNCATE included; SQLite: row-level triggers (all it has).

SQLite's batch mode (``op.batch_alter_table``) recreates a table and drops its triggers:
a later migration that alters one of these tables with it must create them again
(``create_triggers`` below; tests/test_answer_cache.py fails if a trigger is missing).
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TABLES = ("currencies", "products", "product_prices", "releases", "articles")
EVENTS = ("insert", "update", "delete")
PG_EVENTS = (*EVENTS, "truncate")
BUMP = (
    "INSERT INTO content_versions (name, version) VALUES ('public', 1) "
    "ON CONFLICT (name) DO UPDATE SET version = content_versions.version + 1"
)


def create_triggers(tables=TABLES) -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
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
    if postgresql:
        op.execute("DROP FUNCTION cmsshop_bump_content_version()")
