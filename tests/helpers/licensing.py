"""Calling the licensing routes as a product runtime does, and arranging licenses."""

from __future__ import annotations

import json
import secrets
import threading
import urllib.error
import urllib.request

import webtest
from joserfc import jws
from joserfc.jwk import KeySet
from sqlalchemy import func, select

from cmsshop.models import License, Product
from cmsshop.services.licensing.issuing import generate_license_key
from cmsshop.services.licensing.signing import lease_registry

SHOP = "https://www.Customer-Shop.com/wp-admin/"


IP = "203.0.113.7"


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def runtime(app, ip: str = IP) -> webtest.TestApp:
    """A product runtime: no cookies, no CSRF token, just its IP."""
    return webtest.TestApp(app, extra_environ={"REMOTE_ADDR": ip})


def make_product(dbsession, slug: str) -> Product:
    product = Product(slug=slug, name=slug.title(), licensed=True, published=True)
    dbsession.add(product)
    dbsession.commit()
    return product


def make_license(dbsession, product: Product, **fields) -> License:
    fields.setdefault("max_activations", 2)
    license = License(key=generate_license_key(), product_id=product.id, **fields)
    dbsession.add(license)
    dbsession.commit()
    return license


def deactivate_path(key: str, activation_id) -> str:
    """The customer's JSON route that deactivates one installation of license ``key``."""
    return f"/api/dashboard/licenses/{key}/activations/{activation_id}/deactivate"


def call_body(license: License, product: str = "site-guard-pro", **overrides) -> dict:
    return {
        "product": product,
        "licenseKey": license.key,
        "domain": SHOP,
        "fingerprint": "install-0001",
        "nonce": new_nonce(),
        **overrides,
    }


def post(client, action: str, body: dict, status: int | str = "*", form: bool = False):
    if form:
        return client.post(f"/api/license/{action}", body, status=status)
    return client.post_json(f"/api/license/{action}", body, status=status)


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_int == status, response.text
    assert response.content_type == "application/json"
    body = response.json
    assert body["code"] == code, body
    assert {"title", "message", "hints", "supportCode"} <= set(body)
    return body


def lease_claims(client, token: str) -> tuple[dict, dict]:
    """Verify ``token`` against the service's JWKS; (header, claims)."""
    jwks = client.get("/api/license/jwks.json").json
    obj = jws.deserialize_compact(token, KeySet.import_key_set(jwks), registry=lease_registry())
    return obj.headers(), json.loads(obj.payload)


def count(dbsession, model, *where) -> int:
    dbsession.expire_all()
    return dbsession.scalar(select(func.count()).select_from(model).where(*where))


def http_post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def race(url: str, bodies: list[dict]) -> list[tuple[int, dict]]:
    barrier = threading.Barrier(len(bodies))
    results: list = [None] * len(bodies)

    def worker(index: int) -> None:
        barrier.wait()
        results[index] = http_post(url, bodies[index])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


# --- offline activation ----------------------------------------------------------------------

OFFLINE_SITE = "https://intranet.example.com/"
OFFLINE_FINGERPRINT = "airgapped-install-0001"


def offline_runtime(account, pinned, state_dir, fingerprint=OFFLINE_FINGERPRINT, **kwargs):
    """The product, installed where no network reaches the shop (port 9 never answers);
    ``account`` holds the site-guard license, ``pinned`` the shop's JWKS."""
    from cmsshop.runtime import LicenseClient

    return LicenseClient(
        "http://127.0.0.1:9",
        product="site-guard",
        license_key=account.license.key,
        domain=kwargs.pop("domain", OFFLINE_SITE),
        fingerprint=fingerprint,
        pinned_keys=pinned,
        timeout=0.5,
        state_path=str(state_dir / f"{fingerprint}.json"),
        **kwargs,
    )


def offline_activation_path(key: str) -> str:
    return f"/api/dashboard/licenses/{key}/offline-activation"
