"""Admin pages for customers (/admin/customers): always on, like the accounts
themselves (cmsshop.services.accounts.customers)."""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import NotFound
from cmsshop.security import ADMIN
from cmsshop.services.accounts import customers, profile
from cmsshop.views.shared.json import StrictString, parse_path_id, read_page_request, read_query


class CustomerSearchSchema(colander.MappingSchema):
    q = colander.SchemaNode(StrictString(), missing=None, validator=colander.Length(max=320))


@view_config(
    route_name="pages.admin_customers",
    request_method="GET",
    renderer="admin/accounts/index.html",
    permission=ADMIN,
)
def customers_page(request):
    paging = read_page_request(request)
    data, _ = read_query(request, CustomerSearchSchema())
    page = customers.search_customers(request.db, paging, data["q"])
    return {"admin_section": "customers", "page": page, "q": data["q"] or ""}


@view_config(
    route_name="pages.admin_customer",
    request_method="GET",
    renderer="admin/accounts/detail.html",
    permission=ADMIN,
)
def customer_page(request):
    user_id = parse_path_id(request.matchdict["id"])
    try:
        if user_id is None:
            raise customers.CustomerMissing(request.matchdict["id"])
        detail = customers.customer_detail(request.db, user_id)
    except customers.CustomerMissing:
        raise NotFound("No customer has this id.") from None
    activity = [
        (entry, profile.describe(entry.action))
        for entry in profile.recent_activity(request.db, detail.user)
    ]
    return {"admin_section": "customers", "detail": detail, "activity": activity}
