"""Alembic environment: the URL comes from the app's own ini (and CMSSHOP_DATABASE_URL),
so migrations always target the database the app uses."""

from __future__ import annotations

from alembic import context
from pyramid.paster import get_appsettings, setup_logging

from cmsshop.db import make_engine
from cmsshop.models import Base
from cmsshop.models.meta import include_for
from cmsshop.settings import load_settings

config = context.config


def database_url() -> str:
    url = config.attributes.get("database_url")
    if url:
        return url
    ini = config.config_file_name
    setup_logging(ini)
    return load_settings(get_appsettings(ini, name="main"))["cmsshop.database_url"]


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(database_url())
    with engine.connect() as connection:
        _run(connection)
        connection.commit()
    engine.dispose()


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things: batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_for(connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
