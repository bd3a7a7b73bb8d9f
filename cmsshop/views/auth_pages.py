"""The log-in, registration and log-out pages: the JSON routes' schemas and services
(cmsshop.services.accounts.login), rendered as forms."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.errors import ApiError
from cmsshop.security import end_session, start_session
from cmsshop.services.accounts import login
from cmsshop.services.accounts.users import PasswordHasher
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.views.auth import LoginSchema, RegisterSchema, client_ip
from cmsshop.views.forms import FormInvalid, field_errors, read_form, safe_next, see_other

NOTICES = {
    "logged_out": "You are logged out.",
    "logged_in": "You are logged in.",
    "registered": "Welcome! Your account is ready.",
}


def _after_login(request) -> str:
    default = "/account" if "dashboard" in request.registry.settings["cmsshop.modules"] else "/"
    return safe_next(request.POST.get("next") or request.GET.get("next"), default)


def _form_page(request, errors: dict, form: dict, status: int = 200) -> dict:
    request.response.status = status
    next_path = safe_next(request.POST.get("next") or request.GET.get("next"), "")
    return {
        "errors": errors,
        "form": form,
        "next": next_path,
        "closed": not request.registry.settings["cmsshop.registration_open"],
        "not_created": False,
    }


@view_config(route_name="pages.login", request_method="GET", renderer="auth/login.html")
def login_page(request):
    return _form_page(request, {}, {})


@view_config(route_name="pages.login", request_method="POST", renderer="auth/login.html")
def login_submit(request):
    try:
        data = read_form(request, LoginSchema())
        user = login.log_in(
            request.db,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            data["email"],
            data["password"],
            client_ip(request),
        )
    except FormInvalid as exc:
        return _form_page(request, exc.errors, exc.form, 422)
    except ApiError as exc:  # wrong password (401) or too many attempts (429)
        form = {"email": request.POST.get("email", "")}
        for name, value in exc.headers.items():
            request.response.headers[name] = value
        return _form_page(request, {"form": exc.message}, form, exc.status)
    start_session(request, user)
    return see_other(request, _after_login(request))


@view_config(route_name="pages.register", request_method="GET", renderer="auth/register.html")
def register_page(request):
    return _form_page(request, {}, {})


@view_config(route_name="pages.register", request_method="POST", renderer="auth/register.html")
def register_submit(request):
    if not request.registry.settings["cmsshop.registration_open"]:
        return _form_page(request, {}, {}, 403)
    try:
        data = read_form(request, RegisterSchema())
        user = login.register(
            request.db,
            request.find_service(PasswordHasher),
            request.find_service(RateLimiter),
            data["email"],
            data["password"],
            data["name"],
            client_ip(request),
        )
    except FormInvalid as exc:
        page = _form_page(request, exc.errors, exc.form, 422)
    except ApiError as exc:
        page = _form_page(request, field_errors(exc), posted_form(request), exc.status)
    else:
        if user is not None:
            start_session(request, user)
            return see_other(request, _after_login(request), notice="registered")
        # The email has an account already: the same neutral answer as the JSON route
        # (no session), without saying whether it exists.
        page = _form_page(request, {}, posted_form(request))
        page["not_created"] = True
    return page


def posted_form(request) -> dict:
    return {name: request.POST.get(name, "") for name in ("email", "name")}


@view_config(route_name="pages.logout", request_method="POST")
def logout_submit(request):
    end_session(request)
    return see_other(request, "/", notice="logged_out")


def includeme(config) -> None:
    config.add_route("pages.login", "/login")
    config.add_route("pages.register", "/register")
    config.add_route("pages.logout", "/logout")
    config.add_page_notices(NOTICES)
    config.scan("cmsshop.views.auth_pages")
