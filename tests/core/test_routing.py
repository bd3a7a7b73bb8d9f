"""The indexed routes mapper (cmsshop.routing) picks exactly the route Pyramid's own
mapper picks, for every route of the real app and paths around them."""

from __future__ import annotations

import re

import pytest
from pyramid.interfaces import IRoutesMapper
from pyramid.request import Request
from pyramid.urldispatch import RoutesMapper

from cmsshop.routing import MAX_HEADS, IndexedRoutesMapper, literal_prefix, may_match, path_head


def sample_paths(pattern: str) -> set[str]:
    """Paths a route's pattern matches (placeholders filled) and near misses."""
    filled = re.sub(r"\{[^}]*\}", "x1", pattern)
    filled = re.sub(r"\*\w*", "a/b", filled)
    if not filled.startswith("/"):
        filled = "/" + filled
    paths = {filled, filled + "/", filled.rstrip("/"), filled + "x", filled + "/extra"}
    parts = filled.split("/")
    paths.update("/".join(parts[:i]) or "/" for i in range(len(parts)))
    return paths


def test_the_app_uses_the_indexed_mapper_and_it_agrees_with_pyramids(app):
    mapper = app.registry.getUtility(IRoutesMapper)
    assert isinstance(mapper, IndexedRoutesMapper)
    routes = mapper.get_routes()
    assert len(routes) > 50
    paths = {
        "/",
        "",
        "/api",
        "/api/",
        "//api//store",
        "/%C3%A1pi/st%C3%B6re",
        "/api/license/validate",
    }
    for route in routes:
        paths |= sample_paths(route.pattern)
    matched = set()
    for path in sorted(paths):
        for method in ("GET", "POST"):
            request = Request.blank(path or "/", method=method)
            request.registry = app.registry
            ours = mapper(request)
            theirs = RoutesMapper.__call__(mapper, request)  # Pyramid's own loop
            assert ours["route"] is theirs["route"], (path, method)
            assert ours["match"] == theirs["match"], (path, method)
            if ours["route"] is not None:
                matched.add(ours["route"].name)
    # The samples reach nearly every route (a few need a value their regex accepts).
    assert len(matched) > 0.8 * len(routes)


def test_a_path_that_does_not_decode_is_refused_as_pyramid_refuses_it(app):
    from pyramid.exceptions import URLDecodeError

    request = Request.blank("/api/%FF")
    with pytest.raises(URLDecodeError):
        app.registry.getUtility(IRoutesMapper)(request)


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        ("/api/store/products/{slug}", "/api/store/products/"),
        ("api/health", "/api/health"),
        ("/files/*subpath", "/files/"),
        ("/old/:name", "/old/"),
        ("{anything}", "/"),
    ],
)
def test_literal_prefix(pattern, prefix):
    assert literal_prefix(pattern) == prefix


@pytest.mark.parametrize(
    ("prefix", "path", "may"),
    [
        ("/api/license/", "/api/license/validate", True),
        ("/api/licenses", "/api/license/validate", False),
        ("/api/lic", "/api/license/validate", True),  # "/api/lic{x}" could match
        ("/api/health", "/api", True),
        ("/api/", "/", False),
        ("/", "/api/store/x", True),
        ("/api/store/products/", "/api/store", True),
        ("/products/", "/api/store/products/x", False),
    ],
)
def test_may_match(prefix, path, may):
    assert may_match(prefix, path_head(path)) is may


def test_candidates_are_kept_for_a_bounded_number_of_heads():
    mapper = IndexedRoutesMapper()
    mapper.connect("a", "/a/{x}")
    mapper.connect("b", "/b/c")
    for i in range(MAX_HEADS + 7):
        mapper.candidates(f"/p{i}/q")
    assert len(mapper._candidates) == MAX_HEADS
    assert [r.name for r in mapper.candidates("/b/c")] == ["b"]
    mapper.connect("c", "/{any}")  # a new route: worked out afresh
    assert [r.name for r in mapper.candidates("/b/c")] == ["b", "c"]
