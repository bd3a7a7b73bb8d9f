"""Page benchmark: is the HTML product list as cheap as the JSON list it is built on?

    .venv/bin/python bench/pages.py          # a fresh SQLite file in a temp dir
    .venv/bin/python bench/pages.py --reset \
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

It creates and migrates a fresh database, loads 200 published products (two prices and a
release each), serves the real app (built by its paste factory) with waitress in a separate
process on a free loopback port, and drives it with concurrent keep-alive clients (see
bench/benchlib.py). In the same run it measures
``GET /products`` (the Jinja2 page) and ``GET /api/store/products`` (the JSON list), both
on random pages of the same size, and prints requests/s, p50/p99 latency and the ratio.
It exits 1 when the page's throughput is under half the JSON route's. Not part of the
test suite; a run takes about half a minute.

    .venv/bin/python bench/pages.py --cached  # warm anonymous pages from the answer cache

``--cached`` serves the store and docs modules with the answer cache on, adds 50
published articles, warms the cache and measures every page it keeps for anonymous
visitors against the bare route: the home page, product list pages, product pages (a
returning visitor with an anonymous cookie, and a first visit without one, whose answer
sets the cookie), the docs list and articles. It exits 1 when a page is under
``CACHED_TARGET`` (70 %) of bare.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchlib import (  # noqa: E402 - bench/benchlib.py, beside this script
    BARE,
    add_client_option,
    get_route,
    load_products,
    measure,
    measure_with,
    migrate_fresh,
    report,
    serve_wsgi,
    start_server,
    stop_server,
    with_bare_route,
)

PRODUCTS = 200
PER_PAGE = 20
MIN_RATIO = 0.5  # the page may cost at most twice the JSON route
ARTICLES = 50
CACHED_TARGET = 0.70  # a warm cached page: at least 70 % of the bare route's throughput


def load(url: str, articles: int = 0) -> None:
    from sqlalchemy import insert
    from sqlalchemy.orm import Session

    from cmsshop.db import make_engine
    from cmsshop.models import Article
    from cmsshop.services.docs.markdown import render_markdown
    from cmsshop.util import utcnow

    engine = make_engine(url)
    with Session(engine) as session:
        load_products(session, PRODUCTS, random.Random(42))
        body = "## Install\n\nUnzip, then *activate* it.\n\n- one\n- two\n\nSee [more](/docs)."
        if articles:
            session.execute(
                insert(Article),
                [
                    {
                        "slug": f"article-{i:03d}",
                        "title": f"How to {i:03d}",
                        "summary": "A guide",
                        "category": ("guides", "reference")[i % 2],
                        "body": body,
                        "body_html": render_markdown(body),
                        "published": True,
                        "published_at": utcnow(),
                    }
                    for i in range(articles)
                ],
            )
        session.commit()
    engine.dispose()


def serve(url: str, storage: str, threads: int, cached: bool = False) -> None:
    """Child process: the real app beside the bare route on a free loopback port. By
    default with the answer cache off: the page and the JSON list then do the same
    queries, and the ratio is the cost of rendering HTML instead of JSON. ``cached``: the
    store and docs modules with the answer cache on (its default settings)."""
    import secrets

    from benchlib import paste_app

    settings = {
        "cmsshop.environment": "benchmark",
        "cmsshop.database_url": url,
        "cmsshop.secret": secrets.token_urlsafe(48),
        "cmsshop.modules": "store docs" if cached else "store",
        "cmsshop.storage_dir": storage,
    }
    if not cached:
        settings["cmsshop.answer_cache_ttl"] = "0"
    app = paste_app(settings)
    serve_wsgi(with_bare_route(app), threads)


def cached_pages(url: str, workdir: str, args) -> int:
    """Warm anonymous pages from the answer cache against the bare route."""
    import secrets

    from benchlib import Route, http_request

    pages = PRODUCTS // PER_PAGE
    # Returning visitors: each request carries one of 100 anonymous cookies.
    cookies = [f"cmsshop_session=anon.{secrets.token_urlsafe(32)}" for _ in range(100)]

    def product(rng) -> str:
        return f"/products/product-{rng.randrange(PRODUCTS):05d}"

    def returning(rng, n):
        return [
            http_request("GET", product(rng), headers={"Cookie": rng.choice(cookies)})
            for _ in range(n)
        ]

    every_product = [f"/products/product-{i:05d}" for i in range(PRODUCTS)]
    product_lists = [f"/products?page={p}&perPage={PER_PAGE}" for p in range(1, pages + 1)]
    articles = [f"/docs/article-{i:03d}" for i in range(ARTICLES)]
    doc_lists = [f"/docs?page={p}" for p in range(1, ARTICLES // 20 + 2)]
    target = {"target": CACHED_TARGET}
    routes = [
        BARE,
        get_route("GET / (home page)", lambda rng: "/", visit=["/", "/"], **target),
        get_route(
            "GET /products?page=N (list page)",
            lambda rng: rng.choice(product_lists),
            visit=["/", *product_lists],
            **target,
        ),
        Route(
            "GET /products/{slug} (anonymous cookie)",
            returning,
            visit=["/", *every_product],
            **target,
        ),
        get_route(
            "GET /products/{slug} (first visit: sets it)",
            product,
            visit=["/", *every_product],
            **target,
        ),
        get_route(
            "GET /docs?page=N (docs list)",
            lambda rng: rng.choice(doc_lists),
            visit=["/", *doc_lists],
            **target,
        ),
        get_route(
            "GET /docs/{slug} (article)",
            lambda rng: rng.choice(articles),
            visit=["/", *articles],
            **target,
        ),
    ]
    server, port = start_server(
        __file__, ["--threads", str(args.threads), "--cached", "--serve", url, workdir]
    )
    try:
        print(
            f"database: {url.split('@')[-1]} -- {PRODUCTS} products, {ARTICLES} articles\n"
            f"waitress: {args.threads} threads, {args.clients} keep-alive clients, "
            f"{args.seconds:.0f}s per route, {os.cpu_count()} CPUs; answer cache ON, "
            "anonymous visitors, warm\n"
        )
        results = measure(port, routes, seconds=args.seconds, rounds=4, clients=args.clients)
        ok = report(results, "Warm anonymous HTML pages from the answer cache")
    finally:
        stop_server(server)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--reset", action="store_true", help="PostgreSQL: drop the schema first")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8, help="waitress threads")
    parser.add_argument("--seconds", type=float, default=8.0, help="per route")
    parser.add_argument(
        "--cached", action="store_true", help="warm anonymous pages from the answer cache"
    )
    add_client_option(parser, " (--cached: always the Python clients, which send cookies)")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "STORAGE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.threads, args.cached)
        return 0

    workdir = tempfile.mkdtemp(prefix="cmsshop-pages-bench-")
    url = args.database_url or f"sqlite:///{workdir}/bench.sqlite"
    began = time.perf_counter()
    migrate_fresh(url, args.reset).dispose()
    load(url, ARTICLES if args.cached else 0)
    if args.cached:
        try:
            return cached_pages(url, workdir, args)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            print(f"total run {time.perf_counter() - began:.0f}s")
    pages = PRODUCTS // PER_PAGE

    def query(rng) -> str:
        return f"?page={rng.randrange(1, pages + 1)}&perPage={PER_PAGE}"

    json_route = get_route(
        "GET /api/store/products (JSON)", lambda rng: "/api/store/products" + query(rng)
    )
    page_route = get_route("GET /products (HTML page)", lambda rng: "/products" + query(rng))
    server, port = start_server(__file__, ["--threads", str(args.threads), "--serve", url, workdir])
    try:
        print(
            f"database: {url.split('@')[-1]} -- {PRODUCTS} products, {PER_PAGE} a page\n"
            f"waitress: {args.threads} threads, {args.clients} keep-alive clients "
            f"({args.client}), {args.seconds:.0f}s per route, {os.cpu_count()} CPUs; "
            "answer cache off\n"
        )
        results = measure_with(args.client)(
            port, [BARE, json_route, page_route], seconds=args.seconds, rounds=4,
            clients=args.clients,
        )  # fmt: skip
        ok = report(results)
    finally:
        stop_server(server)
        shutil.rmtree(workdir, ignore_errors=True)
    _, json_result, page_result = results
    ratio = page_result["rps"] / json_result["rps"]
    print(
        f"\npage / JSON throughput: {ratio:.2f} (at least {MIN_RATIO:.2f} required); "
        f"total run {time.perf_counter() - began:.0f}s"
    )
    if ratio < MIN_RATIO:
        print("FAIL: the HTML page is more than twice as slow as the JSON route")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
