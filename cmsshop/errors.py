"""The API's error vocabulary. Raise these from views and services; the single
exception view in cmsshop.views.errors turns every one into the JSON error body."""

from __future__ import annotations

from typing import Any, NamedTuple


class ErrorCode(NamedTuple):
    status: int
    title: str
    meaning: str


# Every error ``code`` the API can answer: one place for clients, the table in
# docs/errors.md and tests/core/test_error_catalogue.py (which finds each code raised
# anywhere in cmsshop/ here).
ERROR_CODES: dict[str, ErrorCode] = {
    # --- core: every route ---------------------------------------------------------------
    "bad_request": ErrorCode(400, "Bad request", "The request could not be processed."),
    "malformed_request": ErrorCode(
        400,
        "Malformed request",
        "The URL or form is not valid UTF-8, or a header holds control characters.",
    ),
    "malformed_json": ErrorCode(400, "Malformed JSON", "The body is not valid UTF-8 JSON."),
    "not_authenticated": ErrorCode(401, "Login required", "The route needs a login session."),
    "invalid_credentials": ErrorCode(401, "Login failed", "The email or password is wrong."),
    "forbidden": ErrorCode(403, "Forbidden", "The account lacks the role for this route."),
    "csrf_failed": ErrorCode(
        403, "CSRF token missing or stale", "An unsafe method without the session's token."
    ),
    "registration_closed": ErrorCode(
        403, "Registration closed", "cmsshop.registration_open is off."
    ),
    "invalid_api_token": ErrorCode(
        401,
        "Invalid API token",
        "The Bearer token is malformed, unknown, revoked or expired, or its creator is no "
        "longer an admin.",
    ),
    "insufficient_scope": ErrorCode(
        403, "Missing scope", "The API token lacks the scope this route needs (named in scope)."
    ),
    # --- accounts: mailed links (password reset, email verification) ---------------------
    "invalid_token": ErrorCode(
        400, "Invalid link", "The password-reset or verification token is unknown or malformed."
    ),
    "email_not_verified": ErrorCode(
        403,
        "Email not verified",
        "The password is right but the account's email is not confirmed yet.",
    ),
    "token_expired": ErrorCode(
        410, "Link expired", "The password-reset or verification link is past its lifetime."
    ),
    "token_used": ErrorCode(
        410, "Link already used", "The password-reset or verification link was used before."
    ),
    "not_found": ErrorCode(404, "Not found", "No route or resource at this path."),
    "module_disabled": ErrorCode(
        404, "Module disabled", "The route belongs to a feature module that is switched off."
    ),
    "support_code_not_found": ErrorCode(
        404, "Not found", "No server error was recorded with this support code (admin)."
    ),
    "method_not_allowed": ErrorCode(
        405, "Method not allowed", "The route exists; the Allow header lists its methods."
    ),
    "conflict": ErrorCode(409, "Conflict", "The request conflicts with the current state."),
    "payload_too_large": ErrorCode(
        413, "Request body too large", "The declared or sent body is over the route's limit."
    ),
    "unsupported_media_type": ErrorCode(
        415, "Unsupported media type", "The route accepts application/json."
    ),
    "validation_failed": ErrorCode(
        422, "Validation failed", "Fields are missing or invalid; `errors` has one per field."
    ),
    "rate_limited": ErrorCode(
        429, "Too many requests", "A rate policy refused the request; see Retry-After."
    ),
    "internal_error": ErrorCode(
        500, "Internal server error", "An unexpected error; quote the support code."
    ),
    "service_unavailable": ErrorCode(
        503, "Service unavailable", "A service the request depends on is unavailable."
    ),
    "database_unavailable": ErrorCode(
        503, "Database unavailable", "The database did not answer in time; see Retry-After."
    ),
    # --- store, checkout and catalogue administration --------------------------------------
    "malformed_query": ErrorCode(
        400, "Malformed query string", "The query string is not valid UTF-8."
    ),
    "malformed_multipart": ErrorCode(
        400, "Malformed multipart body", "A release upload's multipart body could not be read."
    ),
    "product_not_found": ErrorCode(404, "Not found", "No product has this slug."),
    "image_not_found": ErrorCode(404, "Not found", "The product has no image with this id."),
    "article_not_found": ErrorCode(404, "Not found", "No article has this slug."),
    "api_token_not_found": ErrorCode(404, "Not found", "No API token has this id."),
    "webhook_endpoint_not_found": ErrorCode(404, "Not found", "No webhook endpoint has this id."),
    "webhook_delivery_not_found": ErrorCode(
        404, "Not found", "The endpoint has no delivery with this id."
    ),
    "legal_page_not_found": ErrorCode(
        404, "Not found", "No legal page of this kind (or version) is published."
    ),
    "currency_not_found": ErrorCode(404, "Not found", "No currency has this code."),
    "order_not_found": ErrorCode(404, "Not found", "No order (of yours) has this number."),
    "sandbox_disabled": ErrorCode(
        404, "No sandbox", "The local payment sandbox is off on a production site."
    ),
    "cart_not_found": ErrorCode(404, "Not found", "You have no cart with this id."),
    "cart_line_not_found": ErrorCode(404, "Not found", "The product is not in the cart."),
    "cart_empty": ErrorCode(422, "Cart empty", "There is nothing in the cart to pay for."),
    "cart_changed": ErrorCode(
        409,
        "Cart changed",
        "A price changed or a product left the shop since the buyer saw the cart.",
    ),
    "seller_identity_missing": ErrorCode(
        409,
        "The shop is not ready to sell",
        "The seller's legal details for invoices are incomplete (production only).",
    ),
    "slug_taken": ErrorCode(409, "Slug taken", "Another product or article uses this slug."),
    "product_has_no_release": ErrorCode(
        409, "No release yet", "A product is published only once it has a stable release."
    ),
    "version_exists": ErrorCode(
        409, "Version exists", "The product has a release of this version."
    ),
    "currency_exists": ErrorCode(409, "Currency exists", "A currency with this code exists."),
    "currency_disabled": ErrorCode(
        409, "Currency disabled", "Only an enabled currency can be the default."
    ),
    "currency_is_default": ErrorCode(
        409, "Default currency", "The default currency cannot be disabled, deleted or unset."
    ),
    # --- coupons: a checkout refuses a coupon with one of the 422s (docs/checkout.md) -------
    "coupon_unknown": ErrorCode(422, "Unknown coupon", "No coupon has this code."),
    "coupon_not_started": ErrorCode(
        422, "Coupon not valid yet", "The coupon's validity has not begun."
    ),
    "coupon_expired": ErrorCode(422, "Coupon expired", "The coupon's validity has ended."),
    "coupon_paused": ErrorCode(422, "Coupon paused", "An admin paused the coupon."),
    "coupon_used_up": ErrorCode(
        422, "Coupon used up", "The coupon reached its total number of redemptions."
    ),
    "coupon_limit_reached": ErrorCode(
        422, "Coupon limit reached", "The customer used the coupon as often as it allows."
    ),
    "coupon_not_applicable": ErrorCode(
        422,
        "Coupon not applicable",
        "The coupon discounts nothing in the order, or not in the order's currency.",
    ),
    "coupon_minimum_not_met": ErrorCode(
        422, "Order too small for the coupon", "The order's subtotal is below its minimum."
    ),
    "coupon_not_found": ErrorCode(404, "Not found", "No coupon has this code (admin)."),
    "coupon_exists": ErrorCode(409, "Coupon exists", "A coupon with this code exists."),
    # --- mail ---------------------------------------------------------------------------
    "mail_message_not_found": ErrorCode(404, "Not found", "No outbox message has this id."),
    "mail_message_pending": ErrorCode(
        409, "Message pending", "The message is still queued; only sent or failed ones resend."
    ),
    # --- payments and webhooks -------------------------------------------------------------
    "invalid_signature": ErrorCode(
        400, "Invalid signature", "The webhook delivery's signature does not verify."
    ),
    "payment_event_not_found": ErrorCode(404, "Not found", "No payment event has this id."),
    "already_fulfilled": ErrorCode(
        409, "Already fulfilled", "The order was fulfilled before; nothing was created."
    ),
    "order_not_fulfillable": ErrorCode(
        409, "Order cannot be fulfilled", "The order's status does not allow fulfilment."
    ),
    "pending_order": ErrorCode(
        409, "Order not found", "The webhook's order is not known (yet); the provider retries."
    ),
    "payment_not_final": ErrorCode(
        409, "Payment not final", "The provider has not settled the payment yet."
    ),
    "cannot_reprocess": ErrorCode(
        409, "Cannot reprocess", "This payment event cannot be processed again."
    ),
    "webhook_not_configured": ErrorCode(
        503, "Webhook not configured", "The webhook has no secret or id configured yet."
    ),
    "verification_unavailable": ErrorCode(
        503, "Verification unavailable", "The webhook signature cannot be checked right now."
    ),
    "confirm_failed": ErrorCode(
        503, "Confirmation failed", "The provider API could not confirm the payment now."
    ),
    "capture_failed": ErrorCode(
        503, "Capture failed", "The approved payment could not be captured now."
    ),
    "order_not_refundable": ErrorCode(
        409,
        "Order cannot be refunded",
        "Only a paid order (or one held for review) with a provider payment can be refunded.",
    ),
    "refund_exceeds_remaining": ErrorCode(
        422, "Refund too large", "The refund is more than what is left of the order or line."
    ),
    "refund_refused": ErrorCode(
        502, "Refund refused", "The provider refused the refund; nothing changed."
    ),
    "refund_provider_unavailable": ErrorCode(
        503, "Refund unavailable", "The provider could not be reached; nothing changed."
    ),
    # --- subscriptions ---------------------------------------------------------------------
    "subscription_plan_not_found": ErrorCode(
        404, "Not found", "The product is not sold as a subscription (admin)."
    ),
    "subscription_not_found": ErrorCode(404, "Not found", "You have no such subscription."),
    "subscription_not_renewing": ErrorCode(
        409, "Not renewing", "The subscription does not renew itself; there is nothing to cancel."
    ),
    "subscription_not_cancelling": ErrorCode(
        409, "No cancellation scheduled", "Only a scheduled cancellation can be taken back."
    ),
    "subscription_provider_off": ErrorCode(
        409, "Provider switched off", "The subscription's provider is not enabled on this site."
    ),
    "subscription_plan_change_unsupported": ErrorCode(
        409, "Plan change unsupported", "The subscription's provider cannot change its plan."
    ),
    "subscription_in_trial": ErrorCode(
        409, "In a free trial", "A subscription's plan changes once its free trial has ended."
    ),
    "subscription_payment_method_unavailable": ErrorCode(
        409, "Payment method unavailable", "The card of this subscription cannot be changed here."
    ),
    "subscription_provider_unavailable": ErrorCode(
        503, "Provider unavailable", "The provider could not be reached; nothing changed."
    ),
    # --- dashboard, downloads and tickets --------------------------------------------------
    "invalid_download_token": ErrorCode(
        403, "Invalid download link", "The signed download link is malformed or forged."
    ),
    "download_on_hold": ErrorCode(
        403, "Download on hold", "Downloads of this order are held (e.g. a dispute)."
    ),
    "download_not_found": ErrorCode(404, "Download not found", "No download of yours has this id."),
    "release_not_available": ErrorCode(404, "No release yet", "The product has no release yet."),
    "license_not_available": ErrorCode(
        404, "No license for this product", "The product is used without a license key."
    ),
    "ticket_not_found": ErrorCode(404, "Ticket not found", "No support ticket has this id."),
    "invoice_not_found": ErrorCode(
        404, "Invoice not found", "No invoice of yours has this number."
    ),
    "download_link_expired": ErrorCode(
        410, "Download link expired", "The signed link is past its lifetime; get a new one."
    ),
    "download_revoked": ErrorCode(
        410, "Download revoked", "The order was refunded or its downloads revoked."
    ),
    "range_not_satisfiable": ErrorCode(
        416, "Range not satisfiable", "The Range header lies outside the file."
    ),
    "deactivation_limit_reached": ErrorCode(
        429,
        "Deactivation limit reached",
        "The license's self-service deactivations of the last 30 days are used up.",
    ),
    "too_many_pending_orders": ErrorCode(
        429, "Too many unpaid orders", "The customer holds the allowed recent pending orders."
    ),
    "unprocessable_event": ErrorCode(
        422,
        "Unprocessable event",
        "A verified webhook event holds text no database stores (NUL, a lone surrogate); logged.",
    ),
    "payments_not_configured": ErrorCode(
        503, "Checkout unavailable", "The chosen provider has no API credentials (production)."
    ),
    "provider_unavailable": ErrorCode(
        503, "Checkout unavailable", "The provider could not start the payment; nothing charged."
    ),
    "checkout_failed": ErrorCode(
        503, "Checkout unavailable", "No order number could be allocated; try again."
    ),
    "ticket_rate_limited": ErrorCode(
        429, "Too many requests", "Too many support tickets opened in the last hour."
    ),
    "download_file_missing": ErrorCode(
        500, "File missing", "The release file is missing from storage (operator problem)."
    ),
    # --- licensing ---------------------------------------------------------------------------
    "malformed_form": ErrorCode(
        400, "Malformed form", "The license call's url-encoded form is not valid UTF-8."
    ),
    "product_mismatch": ErrorCode(403, "Wrong product", "The license key is for another product."),
    "license_revoked": ErrorCode(403, "License not usable", "The license has been revoked."),
    "license_suspended": ErrorCode(403, "License not usable", "The license is suspended."),
    "license_expired": ErrorCode(403, "License not usable", "The license has expired."),
    "license_not_found": ErrorCode(404, "License not found", "No license has this key."),
    "license_action_refused": ErrorCode(
        409, "Action refused", "The admin action does not fit the license's status."
    ),
    "activation_not_found": ErrorCode(
        404, "Activation not found", "This installation has no activation of the license."
    ),
    "activation_limit_reached": ErrorCode(
        409, "Activation limit reached", "Every activation seat of the license is in use."
    ),
    "nonce_reused": ErrorCode(409, "Nonce reused", "The call's nonce was used before."),
    "signing_unavailable": ErrorCode(
        503, "Signing unavailable", "Leases cannot be signed right now; nothing changed."
    ),
}


class ApiError(Exception):
    """An error with an HTTP status and a stable machine-readable ``code``.

    ``extra`` is merged into the body (e.g. ``errors`` for 422, ``activationsUsed``);
    ``headers`` are added to the response (e.g. ``Retry-After``).
    """

    status = 400
    code = "bad_request"
    title = "Bad request"
    message = "The request could not be processed."
    hints: tuple[str, ...] = ()
    # A 5xx is logged and kept as an error record, unless it answers a failure anyone can
    # cause at will (a forged webhook naming a dead certificate host): such a failure
    # is kept by its own feature as a bounded summary, never as a record per request.
    recorded = True

    def __init_subclass__(cls, **kwargs):
        """A subclass that names a catalogued ``code`` takes its status and title from
        ERROR_CODES unless it sets them itself."""
        super().__init_subclass__(**kwargs)
        entry = ERROR_CODES.get(cls.__dict__.get("code", ""))
        if entry is not None:
            if "status" not in cls.__dict__:
                cls.status = entry.status
            if "title" not in cls.__dict__:
                cls.title = entry.title

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
        title: str | None = None,
        hints: list[str] | tuple[str, ...] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ):
        # A catalogued code brings its status and title, so a raise names only the code.
        entry = ERROR_CODES.get(code) if code else None
        self.status = status or (entry.status if entry else self.status)
        self.code = code or self.code
        self.title = title or (entry.title if entry else self.title)
        self.message = message or self.message
        self.hints = list(hints if hints is not None else self.hints)
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})
        super().__init__(self.message)


class MalformedJson(ApiError):
    code = "malformed_json"
    message = "The request body is not valid UTF-8 JSON."
    hints = ("Send a JSON object encoded as UTF-8.",)


class UnsupportedMediaType(ApiError):
    code = "unsupported_media_type"
    message = "This route accepts application/json."
    hints = ("Set Content-Type: application/json.",)


class ValidationFailed(ApiError):
    code = "validation_failed"
    message = "Some fields are missing or invalid."
    hints = ("See `errors` for a message per field.",)

    def __init__(self, errors: dict[str, str], message: str | None = None, **kwargs):
        super().__init__(message, extra={"errors": errors}, **kwargs)


class NotAuthenticated(ApiError):
    code = "not_authenticated"
    message = "You need to be logged in to do this."
    hints = ("Log in with POST /api/auth/login and send the session cookie.",)


class Forbidden(ApiError):
    code = "forbidden"
    message = "Your account is not allowed to do this."


class InvalidApiToken(ApiError):
    code = "invalid_api_token"
    message = "The API token is malformed, unknown, revoked or expired."
    hints = ("Send Authorization: Bearer <token> with a live token made under /admin/api-tokens.",)

    def __init__(self, message: str | None = None, **kwargs):
        kwargs.setdefault("headers", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        super().__init__(message, **kwargs)


class InsufficientScope(ApiError):
    code = "insufficient_scope"

    def __init__(self, scope: str):
        if scope == "session":
            message = "API tokens cannot call this route: it needs an admin's browser session."
            hints = ["Sign in to the console as an admin to manage API tokens."]
        else:
            message = f"The API token lacks the scope '{scope}' this route needs."
            hints = [f"Use a token with the '{scope}' or 'all' scope (GET routes: 'read')."]
        super().__init__(
            message,
            hints=hints,
            extra={"scope": scope},
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}"'},
        )


class CsrfFailed(ApiError):
    code = "csrf_failed"
    message = "State-changing requests need the current CSRF token."
    hints = ("Read csrfToken from GET /api/auth/session and send it as X-CSRF-Token.",)


class NotFound(ApiError):
    code = "not_found"
    message = "Nothing is here."


class Conflict(ApiError):
    code = "conflict"


class PayloadTooLarge(ApiError):
    code = "payload_too_large"
    message = "The request body is larger than this route accepts."


class RateLimited(ApiError):
    code = "rate_limited"
    message = "Too many requests; wait before trying again."

    def __init__(self, retry_after: int, message: str | None = None, **kwargs):
        kwargs.setdefault("hints", [f"Retry after {retry_after} seconds."])
        headers = {"Retry-After": str(max(1, int(retry_after)))}
        super().__init__(message, headers=headers, **kwargs)
        self.extra.setdefault("retryAfter", max(1, int(retry_after)))


class ServiceUnavailable(ApiError):
    code = "service_unavailable"
    message = "A service this request depends on is unavailable; try again shortly."

    def __init__(self, message: str | None = None, retry_after: int | None = 30, **kwargs):
        headers = kwargs.pop("headers", {}) or {}
        if retry_after:
            headers["Retry-After"] = str(retry_after)
        super().__init__(message, headers=headers, **kwargs)


class MalformedRequest(ApiError):
    code = "malformed_request"
    message = "The request is not valid UTF-8 or a header holds control characters."
    hints = ("Percent-encode UTF-8 text; send no control characters.",)


class DatabaseUnavailable(ServiceUnavailable):
    code = "database_unavailable"
    message = "The database is unavailable; try again shortly."
