"""One transaction per request: commit on success, veto on 4xx/5xx, retry on conflicts."""

from __future__ import annotations

import sqlalchemy as sa
from helpers.app import requires_postgresql
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.config import configure
from cmsshop.errors import Conflict
from cmsshop.models import Currency, ErrorRecord


def app_with_view(settings, view, **view_options):
    config = configure(dict(settings))
    config.add_route("test.view", "/api/test/view")
    config.add_view(
        view, route_name="test.view", renderer="json", require_csrf=False, **view_options
    )
    return config.make_wsgi_app()


def add_currency(session, code="XTS"):
    session.add(Currency(code=code, name="Test", symbol="T", decimals=2))


def test_success_commits(settings, dbsession):
    def view(request):
        add_currency(request.db)
        return {"ok": True}

    new_client(app_with_view(settings, view)).get("/api/test/view")
    assert dbsession.get(Currency, "XTS") is not None


def test_error_response_vetoes_the_commit(settings, dbsession):
    def view(request):
        add_currency(request.db)
        request.db.flush()
        raise Conflict("no")

    new_client(app_with_view(settings, view)).get("/api/test/view", status=409)
    assert dbsession.get(Currency, "XTS") is None


def test_integrity_error_is_retried_and_settles(settings, dbsession):
    """The loser of a unique-insert race runs again and sees the winner's row."""
    add_currency(dbsession)
    dbsession.commit()
    attempts = []

    def view(request):
        attempts.append(request.environ["retry.attempt"])
        if len(attempts) == 1:
            add_currency(request.db)  # duplicate primary key -> IntegrityError
            request.db.flush()
        return {"attempt": request.environ["retry.attempt"]}

    response = new_client(app_with_view(settings, view)).get("/api/test/view")
    assert response.json == {"attempt": 1}
    assert attempts == [0, 1]


def test_conflict_at_commit_on_every_attempt_is_a_json_500(settings, dbsession):
    """An error raised by the commit itself, after the view, still answers JSON."""
    add_currency(dbsession)
    dbsession.commit()
    attempts = []

    def view(request):
        attempts.append(1)
        add_currency(request.db)  # not flushed: fails when pyramid_tm commits
        return {"ok": True}

    response = new_client(app_with_view(settings, view)).get("/api/test/view", status=500)
    assert response.json["code"] == "internal_error"
    assert len(attempts) == 3  # retry.attempts
    code = response.json["supportCode"]
    assert dbsession.scalar(select(ErrorRecord).where(ErrorRecord.support_code == code))


@requires_postgresql
def test_serialization_failure_is_retried(settings, dbsession, engine):
    """A real PostgreSQL serialization failure (40001) makes pyramid_retry run it again."""
    add_currency(dbsession)
    dbsession.commit()
    attempts = []

    def view(request):
        attempts.append(request.environ["retry.attempt"])
        request.db.execute(sa.text("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"))
        request.db.execute(select(Currency.name).where(Currency.code == "XTS")).all()
        if len(attempts) == 1:
            # A concurrent writer commits between our read and our write.
            with engine.begin() as other:
                other.execute(sa.text("UPDATE currencies SET name = 'other' WHERE code = 'XTS'"))
        request.db.execute(sa.update(Currency).where(Currency.code == "XTS").values(name="mine"))
        request.db.flush()
        return {"attempt": request.environ["retry.attempt"]}

    response = new_client(app_with_view(settings, view)).get("/api/test/view")
    assert response.json == {"attempt": 1}
    dbsession.expire_all()
    assert dbsession.get(Currency, "XTS").name == "mine"


def test_only_the_declared_public_reads_run_without_a_transaction(app, make_app):
    """db.needs_transaction (pyramid_tm's activate hook, before the router): GETs and
    HEADs of the routes the store and docs modules declare with add_transactionless_reads
    skip the transaction; any other method, route or module set does not."""
    from pyramid.request import Request

    from cmsshop.db import needs_transaction

    def needs(application, path, method="GET"):
        request = Request.blank("/", method=method)
        request.environ["PATH_INFO"] = path  # as a WSGI server gives it: latin-1 text
        request.registry = application.registry
        return needs_transaction(request)

    for path in ("/api/store/products", "/api/store/products/some-slug", "/api/docs/articles"):
        assert not needs(app, path)
        assert not needs(app, path, "HEAD")
        assert needs(app, path, "POST")
    for path in (
        "/api/store/currencies",
        "/api/store/products/a/b",
        "/api/docs/articles/some-slug",
        "/api/store/products/\xff",  # not UTF-8: no route matches it, the router answers
        "/products",
        "/api/store/productsX",
    ):
        assert needs(app, path), path
    assert not needs(app, "/api/health")
    assert not needs(app, "/api/license/validate", "POST")
    docs_only = make_app(**{"cmsshop.modules": "docs"})
    assert needs(docs_only, "/api/store/products")
    assert not needs(docs_only, "/api/docs/articles")
