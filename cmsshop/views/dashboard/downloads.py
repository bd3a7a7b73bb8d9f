"""GET /api/downloads/{token}: the cookie-less download route behind every signed URL."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.dashboard import records as dashboard
from cmsshop.services.dashboard.downloads import DownloadTokenSigner, IFileDelivery


# No permission and no CSRF: the signed token is the credential, so download managers
# and curl work without the session cookie. GET also answers HEAD (Pyramid implies it).
@view_config(route_name="dashboard.download", request_method="GET", require_csrf=False)
def download(request):
    claims = request.find_service(DownloadTokenSigner).verify(request.matchdict["token"])
    entitlement, release = dashboard.resolve_download(request.db, claims)
    delivery = request.find_service(IFileDelivery).deliver(
        release,
        request.method,
        request.headers.get("Range"),
        request.headers.get("If-Range"),
    )
    if request.method == "GET":
        # Committed when the view returns, before the body is sent: the transfer holds
        # no database connection however long it takes.
        dashboard.log_download(
            request.db,
            entitlement,
            release,
            delivery,
            request.client_addr or "unknown",
            request.user_agent,
        )
    return delivery.response
