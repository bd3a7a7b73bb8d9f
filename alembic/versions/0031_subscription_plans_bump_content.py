"""content_versions bumped by writes to subscription_plans: the product pages (cached for
anonymous visitors) say when a product is sold as a subscription and how often it is
billed, so selling one so, or no longer, must reach them as any catalogue write does

Revision ID: 0031
Revises: 0030
Made as migration 0028 makes its triggers: PostgreSQL one statement-level trigger per
event, TRUNCATE included, running 0017's function; SQLite row-level triggers.
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

TABLE = "subscription_plans"
EVENTS = ("insert", "update", "delete")
PG_EVENTS = (*EVENTS, "truncate")
BUMP = (
    "INSERT INTO content_versions (name, version) VALUES ('public', 1) "
    "ON CONFLICT (name) DO UPDATE SET version = content_versions.version + 1"
)


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for event in PG_EVENTS if postgresql else EVENTS:
        name = f"{TABLE}_{event}_bumps_content_version"
        if postgresql:
            op.execute(
                f"CREATE TRIGGER {name} AFTER {event.upper()} ON {TABLE} "
                "FOR EACH STATEMENT EXECUTE FUNCTION cmsshop_bump_content_version()"
            )
        else:
            op.execute(
                f"CREATE TRIGGER {name} AFTER {event.upper()} ON {TABLE} "
                f"FOR EACH ROW BEGIN {BUMP}; END"
            )


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for event in PG_EVENTS if postgresql else EVENTS:
        name = f"{TABLE}_{event}_bumps_content_version"
        op.execute(f"DROP TRIGGER {name} ON {TABLE}" if postgresql else f"DROP TRIGGER {name}")
