"""The audit log's edge: the admin API (admin_api.py), the console (admin_pages.py),
the request context of admin changes (context.py), its OpenAPI part (openapi.py)."""
