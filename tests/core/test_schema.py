"""The schema alembic builds is the schema the models describe, on every backend."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from cmsshop.models import Base


def test_migrated_schema_matches_models(engine, database_url):
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}"


def test_migrations_are_one_linear_history(database_url):
    from helpers.app import alembic_config

    script = ScriptDirectory.from_config(alembic_config(database_url))
    assert len(script.get_heads()) == 1


def test_downgrade_and_upgrade_again(tmp_path):
    """Every migration can be undone and redone (checked on a scratch SQLite file)."""
    from alembic import command
    from helpers.app import alembic_config

    url = f"sqlite:///{tmp_path / 'scratch.sqlite'}"
    cfg = alembic_config(url)
    command.upgrade(cfg, "head")
    command.downgrade(cfg, "base")
    command.upgrade(cfg, "head")
