"""Declarative base, constraint naming convention and portable column types."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, MetaData
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

# Named constraints let alembic drop and alter them on every backend (SQLite batch mode
# needs names to recreate tables), and make IntegrityError messages name the rule broken.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Primary keys are INTEGER on every backend; a larger number in a query is a DataError
# on PostgreSQL (a 500), so ids from URLs and tokens are range-checked against this.
MAX_ID = 2**31 - 1


def one_of(column: str, values: tuple[str, ...]) -> str:
    """The SQL of a CHECK that ``column`` holds one of ``values`` (the model's constants)."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes on every backend.

    PostgreSQL keeps the offset (timestamptz); SQLite drops it, so values are stored as
    naive UTC and made aware again on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use cmsshop.util.utcnow()")
        value = value.astimezone(dt.UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


def include_for(dialect: str):
    """alembic's ``include_object`` on ``dialect``: an index the models declare for
    another dialect only (``Index(...).ddl_if(dialect=...)``, which create_all honours
    and alembic's comparison does not) is not compared there."""

    def include(obj, name, type_, reflected, compare_to) -> bool:
        if type_ == "index" and not reflected:
            only = getattr(getattr(obj, "_ddl_if", None), "dialect", None)
            if only is not None and only != dialect:
                return False
        return True

    return include
