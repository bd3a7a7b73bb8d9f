"""The view deriver that makes every admin change an audited one.

A view with the ADMIN permission, called with an unsafe method, runs with the
request's :class:`~cmsshop.services.audit.capture.AuditContext` set on ``request.db``
(and active for any other session the view uses), so the ORM listener records each
row it changes. Views of any other permission are returned as they are: the hot paths
get no wrapper at all.
"""

from __future__ import annotations

from cmsshop.security import ADMIN
from cmsshop.services.audit import capture

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def audited_admin_view(view, info):
    if info.options.get("permission") != ADMIN:
        return view

    def wrapper(context, request):
        if request.method in SAFE_METHODS:
            return view(context, request)
        audit_context = capture.request_context(request)
        # On the request's session, for its flush at commit (after the view returned);
        # and for the view's run, for the sessions of its own some services open.
        capture.set_context(request.db, audit_context)
        with capture.acting_as(audit_context):
            return view(context, request)

    return wrapper


audited_admin_view.options = ("permission",)
