"""The view deriver that makes every admin change an audited one.

A view with the ADMIN permission, called with an unsafe method, runs with the
request's :class:`~cmsshop.services.audit.capture.AuditContext` set on ``request.db``,
so the ORM listener records each row it changes. Views of any other permission are
returned as they are: the hot paths get no wrapper at all.
"""

from __future__ import annotations

from cmsshop.security import ADMIN
from cmsshop.services.audit import capture

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def audited_admin_view(view, info):
    if info.options.get("permission") != ADMIN:
        return view

    def wrapper(context, request):
        if request.method not in SAFE_METHODS:
            capture.set_context(request.db, capture.request_context(request))
        return view(context, request)

    return wrapper


audited_admin_view.options = ("permission",)
