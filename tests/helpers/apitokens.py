"""API tokens for tests: made straight through the service (the console and the admin
API that make them are tested in tests/apitokens), and the header that sends one."""

from __future__ import annotations

import datetime as dt

from cmsshop.services.apitokens.tokens import create_token


def make_token(dbsession, admin, scopes=("all",), name="integration", expires_at=None):
    """A new token of ``admin``'s, committed: (the row, its value)."""
    token, value = create_token(
        dbsession, name=name, scopes=list(scopes), created_by=admin, expires_at=expires_at
    )
    dbsession.commit()
    return token, value


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def future(days: int = 30) -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=days)


def iso(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
