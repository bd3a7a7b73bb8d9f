"""The public legal pages (/legal/{kind}) and the ``legal_links`` template global."""

from __future__ import annotations

from pyramid.view import view_config

from cmsshop.services.legal import documents


class LegalLinks:
    """The published legal pages, read once per page and only if a template asks (the
    footer does; a JSON answer never does): iterate it for the links, ``has(kind)`` asks
    whether one kind is published (the checkout forms' terms box)."""

    def __init__(self, request):
        self._request = request
        self._links = None

    def _load(self) -> list[documents.LegalLink]:
        if self._links is None:
            self._links = documents.kept_published_links(self._request.db)
        return self._links

    def __iter__(self):
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __bool__(self) -> bool:
        return bool(self._load())

    def __call__(self) -> list[documents.LegalLink]:
        return list(self._load())

    def has(self, kind: str) -> bool:
        return any(link.kind == kind for link in self._load())


def add_legal_links(event) -> None:
    request = event.get("request")
    if request is None or not str(event.get("renderer_name", "")).endswith(".html"):
        return
    event.setdefault("legal_links", LegalLinks(request))


@view_config(route_name="pages.legal", request_method="GET", renderer="legal/page.html")
def legal_page(request):
    document = documents.published_page(request.db, request.matchdict["kind"])
    return {"document": document}
