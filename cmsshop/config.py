"""The composition root: settings -> Configurator -> core -> feature modules."""

from __future__ import annotations

from pyramid.config import Configurator
from pyramid.renderers import JSON

from cmsshop import logs
from cmsshop.settings import load_settings


def configure(settings: dict | None = None) -> Configurator:
    settings = load_settings(settings or {})
    # Log lines escape control characters and redact secrets, whoever logs them.
    logs.install()
    # pyramid_tm: one explicit transaction manager per request (no thread-local
    # surprises), no user annotation, and a veto so any 4xx/5xx response rolls back.
    settings.setdefault("tm.manager_hook", "pyramid_tm.explicit_manager")
    settings.setdefault("tm.annotate_user", "false")
    settings.setdefault("tm.commit_veto", "pyramid_tm.default_commit_veto")

    config = Configurator(settings=settings)
    config.add_renderer("json", JSON())
    # The transaction manager, before anything that uses request.db.
    config.include("pyramid_tm")
    # Engine and request.db joined to request.tm.
    config.include("cmsshop.db")
    # request.find_service(): how views find backends (signers, file delivery, provider
    # clients, the rate limiter), as in PyPI's warehouse.
    config.include("pyramid_services")
    # The rate limiter service and config.add_rate_policy (modules declare policies).
    config.include("cmsshop.services.ratelimit")
    # The password hasher service, at the cost of cmsshop.password_hashing.
    config.include("cmsshop.services.accounts.users")
    # The add_openapi directive, used by every include below that adds routes.
    config.include("cmsshop.openapi")
    # JSON errors everywhere, request ids, body limit, and the execution policy:
    # pyramid_retry's (a retried request gets a fresh transaction, session and request)
    # wrapped so that an error escaping every view still answers JSON.
    config.include("cmsshop.views.errors")
    # Sessions, security policy and CSRF defaults.
    config.include("cmsshop.security")
    # The web pages' stack: Jinja2, static files with cache-busting, security headers.
    config.include("cmsshop.web")
    # Core routes that are always on, then the pages that are (home, log in, register).
    config.include("cmsshop.views.core")
    config.include("cmsshop.views.auth")
    config.include("cmsshop.views.home_pages")
    config.include("cmsshop.views.auth_pages")
    # The admin console's core pages (dashboard, error lookup): on whatever modules are.
    config.include("cmsshop.views.admin_pages")
    # The admin console's orders and customers pages: orders exist whatever modules are on.
    config.include("cmsshop.views.admin_orders_pages")
    # The mail outbox's admin pages and JSON routes: mail is core, whatever modules are on.
    config.include("cmsshop.views.admin_mail_pages")
    # Feature modules named in cmsshop.modules; 404 stubs for the rest (JSON under /api,
    # an HTML page for their pages).
    config.include("cmsshop.modules")
    config.commit()
    return config
