"""Server-side login sessions, the security policy and CSRF.

The session cookie holds a random token; the database holds its SHA-256 and the CSRF
token of that session. Anonymous visitors get a token too (no database row): their CSRF
token is an HMAC of it under the server secret, so login and registration are protected
without writing a row for every visitor. Processes share nothing but the database, so
any number of them can run behind a load balancer.

The admin JSON API (``/api/admin/*``) also takes ``Authorization: Bearer <API token>``
(services/apitokens). A request that sends one is the token's and nothing else: its
cookie is ignored, it needs no CSRF token (a header a browser never adds by itself is
not an ambient credential), and the token's scopes must cover the route.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets

from pyramid.interfaces import ICSRFStoragePolicy, ISecurityPolicy
from pyramid.security import Allowed, Denied
from sqlalchemy import delete, select
from webob.cookies import RequestCookies
from zope.interface import implementer

from cmsshop.errors import InvalidApiToken, RateLimited
from cmsshop.models import ApiToken, User, UserSession
from cmsshop.services.apitokens import scopes as token_scopes
from cmsshop.services.apitokens.tokens import (
    RATE_POLICY,
    find_usable_token,
    looks_like_token,
    note_use,
    rate_subject,
)
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.util import utcnow

COOKIE_NAME = "cmsshop_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"

# Permissions used in view_config(permission=...).
CUSTOMER = "customer"  # any logged-in user
ADMIN = "admin"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _cookie_token(request) -> str | None:
    return _valid_token(request.cookies.get(COOKIE_NAME))


def _valid_token(token: str | None) -> str | None:
    if token and 20 <= len(token) <= 128 and token.isascii():
        return token
    return None


def session_role(registry, environ) -> str | None:
    """The role of the live session the request's Cookie header names (of the live API
    token, for an admin API call that sends one), or None.

    Read from the headers alone, in a short session of its own: the body limit of a
    release upload depends on it, and is decided before the body is read (by the WSGI
    server, before the app sees the request; see cmsshop/server.py).
    """
    value = _environ_bearer(environ)
    if value is not None:
        # The token's, as for every other admin API call that sends one (its scopes are
        # checked once the app sees the request; the cookie is ignored).
        if not looks_like_token(value):
            return None
        with registry["cmsshop.session_factory"]() as db:
            api_token = find_usable_token(db, value)
            return api_token.created_by.role if api_token is not None else None
    token = _valid_token(RequestCookies(environ).get(COOKIE_NAME))
    if token is None:
        return None
    with registry["cmsshop.session_factory"]() as db:
        row = db.execute(
            select(User.role, UserSession.expires_at)
            .join(User, User.id == UserSession.user_id)
            .where(UserSession.id == hash_token(token))
        ).first()
    if row is None or row.expires_at <= utcnow():
        return None
    return row.role


def _environ_bearer(environ) -> str | None:
    """The value of a Bearer header sent to the admin API ("" for a malformed one)."""
    if not environ.get("PATH_INFO", "").startswith(token_scopes.ADMIN_API_PREFIX):
        return None
    header = environ.get("HTTP_AUTHORIZATION")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def bearer_value(request) -> str | None:
    """The token of an ``Authorization: Bearer`` header sent to the admin API, else None
    (elsewhere the header means nothing to cmsshop)."""
    if not request.path_info.startswith(token_scopes.ADMIN_API_PREFIX):
        return None
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise InvalidApiToken("The Authorization header is not 'Bearer <token>'.")
    return value.strip()


def get_api_token(request) -> ApiToken | None:
    """``request.api_token``: the live API token the request authenticates with, or None
    when it sends none; InvalidApiToken (401) when it sends a bad one, RateLimited (429)
    when the token made too many calls this minute."""
    refusal = request.environ.get("cmsshop.api_token_refusal")
    if refusal is not None:
        # Looked up again (the error views ask who the user is): refuse again, without
        # counting the call twice.
        raise refusal
    try:
        value = bearer_value(request)
        if value is None:
            return None
        if not looks_like_token(value):
            raise InvalidApiToken()
        # Counted before the request's session reads anything: on SQLite a read snapshot
        # older than the counter's write could not become a writer later (note_use), and
        # every retry of the request would count again (RateLimiter.count).
        limiter = request.find_service(RateLimiter)
        decision = limiter.count([(RATE_POLICY, rate_subject(value))])
        if decision is not None:
            raise RateLimited(
                decision.retry_after,
                f"This API token made more than {decision.limit} calls in a minute.",
            )
        token = find_usable_token(request.db, value)
        if token is None:
            raise InvalidApiToken()
    except (InvalidApiToken, RateLimited) as exc:
        request.environ["cmsshop.api_token_refusal"] = exc
        raise
    note_use(token, request.client_addr)
    return token


def get_user_session(request) -> UserSession | None:
    """``request.user_session``: the live session of the cookie, or None (always None
    for a request that authenticates with an API token)."""
    if request.api_token is not None:
        return None
    token = _cookie_token(request)
    if token is None or token.startswith(ANONYMOUS_PREFIX):
        return None  # an anonymous visitor's token is never a session's: nothing to read
    session = request.db.scalar(select(UserSession).where(UserSession.id == hash_token(token)))
    if session is None or session.expires_at <= utcnow():
        return None
    return session


def get_user(request) -> User | None:
    token = request.api_token
    if token is not None:
        return token.created_by
    session = request.user_session
    return session.user if session is not None else None


class ScopeDenied(Denied):
    """Denied for an API token whose scopes do not cover the route: ``scope`` names the
    one to ask for (the forbidden view answers 403 insufficient_scope with it)."""

    def __new__(cls, scope: str):
        denied = super().__new__(cls, "the API token lacks the scope %s", scope)
        denied.scope = scope
        return denied


def answer_depends_on_session(request, anonymous_too: bool) -> bool:
    """Whether this request's answer was shaped by a login session: something (the view,
    the permission check, the CSRF token, a login or logout) looked the session up and
    found one, or, with ``anonymous_too``, looked it up at all (the answer then says
    there is none, or carries the anonymous visitor's CSRF token)."""
    if "user_session" not in request.__dict__:  # reified: set once looked up
        return False
    return anonymous_too or request.__dict__["user_session"] is not None


def _set_cookie(request, token: str | None) -> None:
    settings = request.registry.settings

    def callback(request, response):
        if token is None:
            response.delete_cookie(COOKIE_NAME, path="/")
            return
        response.set_cookie(
            COOKIE_NAME,
            token,
            max_age=settings["cmsshop.session_max_age"],
            path="/",
            httponly=True,
            samesite="Lax",
            secure=settings["cmsshop.session_cookie_secure"],
        )

    request.add_response_callback(callback)


class LoggedIn:
    """Notified when a session starts: ``visitor_token`` is the anonymous visitor's
    cookie token that the login replaces (None if there was none), so features can
    carry over what the visitor had (the cart)."""

    def __init__(self, request, user: User, visitor_token: str | None):
        self.request = request
        self.user = user
        self.visitor_token = visitor_token


def visitor_token(request) -> str | None:
    """The anonymous visitor's cookie token (None when logged in or without a cookie):
    what an anonymous visitor's cart and guest orders are tied to."""
    if request.user_session is not None:
        return None
    return _cookie_token(request)


def start_session(request, user: User) -> UserSession:
    """Log ``user`` in with a brand-new session (never reuse the pre-login token)."""
    previous = visitor_token(request)
    end_session(request, clear_cookie=False)
    if secrets.randbelow(100) == 0:  # purge expired sessions now and then
        request.db.execute(delete(UserSession).where(UserSession.expires_at < utcnow()))
    token = secrets.token_urlsafe(32)
    max_age = request.registry.settings["cmsshop.session_max_age"]
    session = UserSession(
        id=hash_token(token),
        user_id=user.id,
        csrf_token=secrets.token_urlsafe(32),
        expires_at=utcnow() + dt.timedelta(seconds=max_age),
    )
    session.user = user
    request.db.add(session)
    request.db.flush()
    request.user_session = session
    request.user = user
    request.environ["cmsshop.anon_token"] = None
    _set_cookie(request, token)
    request.registry.notify(LoggedIn(request, user, previous))
    return session


def end_session(request, clear_cookie: bool = True) -> None:
    """Delete the session row: every copy of the old cookie stops working."""
    token = _cookie_token(request)
    if token is not None:
        request.db.execute(delete(UserSession).where(UserSession.id == hash_token(token)))
    request.user_session = None
    request.user = None
    if clear_cookie:
        _set_cookie(request, None)


# An anonymous visitor's cookie token starts with this; a login session's never does
# (``secrets.token_urlsafe`` has no "."), so a cookie in this form is known, without a
# database read, to carry no session: the answer cache may serve it a shared page.
ANONYMOUS_PREFIX = "anon."
# Set in the environ of a page rendered for the answer cache (cmsshop.cache): the CSRF
# token is this placeholder, filled in with each visitor's own token when served; the
# environ's CSRF_PLACEHOLDER_USED then says the page holds it.
CSRF_PLACEHOLDER = "cmsshop.csrf_placeholder"
CSRF_PLACEHOLDER_USED = "cmsshop.csrf_placeholder_used"


def _anonymous_token(request) -> str:
    token = request.environ.get("cmsshop.anon_token")
    if token:
        return token
    token = _cookie_token(request)
    if token is None:
        token = ANONYMOUS_PREFIX + secrets.token_urlsafe(32)
        _set_cookie(request, token)
    request.environ["cmsshop.anon_token"] = token
    return token


def surely_anonymous(request) -> bool:
    """Whether the request carries no login session, told from its cookie alone: none,
    or an anonymous visitor's token (ANONYMOUS_PREFIX). Any other cookie -- a session's,
    an expired one's, a token from before the prefix, a malformed value -- is not sure."""
    raw = request.cookies.get(COOKIE_NAME)
    if raw is None:
        return True
    token = _valid_token(raw)
    return token is not None and token.startswith(ANONYMOUS_PREFIX)


@implementer(ICSRFStoragePolicy)
class SessionCSRFStoragePolicy:
    """CSRF tokens bound to the login session (or, before login, to the anonymous token)."""

    def new_csrf_token(self, request) -> str:
        return self.get_csrf_token(request)

    def get_csrf_token(self, request) -> str:
        session = request.user_session
        if session is not None:
            return session.csrf_token
        placeholder = request.environ.get(CSRF_PLACEHOLDER)
        if placeholder:
            # A page rendered for the answer cache: no visitor's token in the stored copy.
            request.environ[CSRF_PLACEHOLDER_USED] = True
            return placeholder
        secret = request.registry.settings["cmsshop.secret"].encode()
        message = b"anonymous-csrf:" + _anonymous_token(request).encode()
        return hmac.new(secret, message, hashlib.sha256).hexdigest()

    def check_csrf_token(self, request, supplied_token) -> bool:
        if not supplied_token or not isinstance(supplied_token, str):
            return False
        if request.user_session is None and _cookie_token(request) is None:
            return False
        expected = self.get_csrf_token(request)
        return hmac.compare_digest(expected.encode(), supplied_token.encode())


@implementer(ISecurityPolicy)
class SessionSecurityPolicy:
    def identity(self, request):
        return request.user

    def authenticated_userid(self, request):
        user = request.user
        return user.id if user is not None else None

    def permits(self, request, context, permission):
        user = request.user
        if user is None:
            return Denied("not logged in")
        if permission == ADMIN and not user.is_admin:
            return Denied("admin role required")
        token = request.api_token
        if token is not None:
            route = request.matched_route
            if route is None or not route.pattern.startswith(token_scopes.ADMIN_API_PREFIX):
                return ScopeDenied("session")
            missing = token_scopes.missing_scope(token.scopes, route.pattern, request.method)
            if missing is not None:
                return ScopeDenied(missing)
        if permission in (CUSTOMER, ADMIN):
            return Allowed("ok")
        return Denied(f"unknown permission {permission}")

    def remember(self, request, userid, **kw):
        return []

    def forget(self, request, **kw):
        return []


def csrf_applies(request) -> bool:
    """CSRF protects ambient credentials (the session cookie); a Bearer token is not one."""
    return request.api_token is None


def includeme(config) -> None:
    config.add_request_method(get_api_token, "api_token", reify=True)
    config.add_request_method(get_user_session, "user_session", reify=True)
    config.add_request_method(get_user, "user", reify=True)
    config.set_security_policy(SessionSecurityPolicy())
    config.set_csrf_storage_policy(SessionCSRFStoragePolicy())
    # Every unsafe method needs the token unless the view opts out (require_csrf=False:
    # licensing and webhooks authenticate by key or signature). The JSON API sends it in
    # the header; the web pages' forms in the csrf_token field (read only when the header
    # is absent, and only from a form body: a JSON body has no POST fields). A request
    # authenticated by an API token needs none (csrf_applies).
    config.set_default_csrf_options(
        require_csrf=True, token=CSRF_FIELD, header=CSRF_HEADER, callback=csrf_applies
    )
