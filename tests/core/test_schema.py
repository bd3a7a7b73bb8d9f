"""The schema alembic builds is the schema the models describe, on every backend."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from cmsshop.models import Base
from cmsshop.models.meta import include_for


def test_migrated_schema_matches_models(engine, database_url):
    with engine.connect() as conn:
        opts = {"compare_type": True, "include_object": include_for(conn.dialect.name)}
        context = MigrationContext.configure(conn, opts=opts)
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


def test_descriptions_stored_before_the_heading_shift_lose_their_second_h1(tmp_path):
    """A product page's <h1> is the product's name: migration 0026 moves the headings of
    descriptions rendered before (a ``#`` stored as <h1>) one level down, as the renderer
    now does."""
    from alembic import command
    from helpers.app import alembic_config
    from sqlalchemy import create_engine, text

    url = f"sqlite:///{tmp_path / 'scratch.sqlite'}"
    cfg = alembic_config(url)
    command.upgrade(cfg, "0025")
    engine = create_engine(url)
    html = '<h1 id="setup">Setup</h1><p>Read <a href="/h1">h1</a></p><h6>Fine print</h6><hr>'
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO products (slug, name, summary, description, description_html, "
                "published, archived, licensed, tier, version_scheme, features, created_at, "
                "updated_at) VALUES ('p', 'P', '', '# Setup', :html, true, false, false, 0, "
                "'pep440', '[]', '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            ),
            {"html": html},
        )
    command.upgrade(cfg, "head")
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT description_html FROM products")).scalar_one()
    engine.dispose()
    assert stored == (
        '<h2 id="setup">Setup</h2><p>Read <a href="/h1">h1</a></p><h6>Fine print</h6><hr>'
    )
